"""Pipelines in the simulator and the search: micro-batches let the stages overlap in the
simulation as in the executor's groups; the delta simulation equals the full one around
pipelines; `--enable-pipeline-parallel` adds pipeline candidates and neighbour proposals; under a
memory limit data parallelism exceeds, the search returns a strategy that fits."""

import io
import random
from dataclasses import replace

import pytest

from flexflow.core import FFConfig
from flexflow.scheduler.pipelines import pipeline_strategy
from flexflow.scheduler.search import (SearchOptions, SearchSpace, initial_candidates,
                                       one_f_one_b_twins, search)
from flexflow.scheduler.simulator import Simulator
from flexflow.scheduler.strategy import (ParallelConfig, StrategyError, data_parallel_strategy,
                                         validate)
from flexflow.scheduler.taskgraph import Checks

from ..parallel.models import BATCH, MODELS
from ..parallel.test_weight_sharding import deep_mlp
from .helpers import compiled, small_machine
from .test_delta import plan_view


def simulator_of(build=deep_mlp, devices=4, machine=None, collectives=False):
    ff, objective = compiled(build, BATCH)
    return Simulator(ff.graph, objective, machine or small_machine(devices, 2),
                     ff.compiled.loss, ff.optimizer.rule(), Checks(collectives=collectives))


def wide_deep_mlp(ff):
    return deep_mlp(ff, width=1024, depth=6)


def test_micro_batches_overlap_the_stages_in_the_simulation():
    """2 stages of a deep mlp on 2 devices (of 2 nodes, which share no cores): each doubling
    of the micro-batches shortens the iteration, 4 of them by over a fifth (the next stage
    works on one micro-batch while this one runs the next)."""
    simulator = simulator_of(wide_deep_mlp, 2)
    times = [simulator.simulate(pipeline_strategy(simulator.graph, 2, 2, m)).time
             for m in (1, 2, 4)]
    assert times[0] > times[1] > times[2]
    assert times[2] < 0.8 * times[0], times


@pytest.mark.parametrize("collectives", [False, True])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_delta_equals_full_around_pipelines(name, collectives):
    """From each pipeline candidate, random proposals (neighbours' configurations among
    them): the delta simulation's time, memory and plans are the full one's."""
    simulator = simulator_of(MODELS[name], collectives=collectives)
    graph = simulator.graph
    options = SearchOptions(1, enable_pipeline_parallel=True, enable_recomputation=True)
    space = SearchSpace(graph, 4, options)
    rng = random.Random(len(name))
    starts = [s for n, s in initial_candidates(graph, 4, options).items() if "pipeline" in n]
    over = {n: 0.0 for n in initial_candidates(graph, 4, options)}
    starts += list(one_f_one_b_twins(graph, 4, options, over).values())  # (none: batch norm)
    assert_delta_equals_full(simulator, space, starts, rng, 6)


def assert_delta_equals_full(simulator, space, starts, rng, steps):
    """From each of `starts`, `steps` proposals of a random layer's neighbour's or a random
    configuration: the delta simulation's time, memory and plans are the full one's."""
    graph = simulator.graph
    assert starts
    for current in starts:
        for _ in range(steps):
            layer = graph.layers[rng.randrange(len(graph.layers) - 1)]
            proposal = dict(current)
            proposal[layer.name] = (space.neighbour_config(layer, current, rng)
                                    if rng.random() < 0.5 else space.random_config(layer, rng))
            try:
                delta = simulator.simulate(proposal)
            except StrategyError:  # 1F1B's order broken by a layer reading micro-batches whole
                with pytest.raises(StrategyError, match="1F1B"):
                    simulator.simulate_full(proposal)
                continue
            full = simulator.simulate_full(proposal)
            assert (delta.time, delta.memory) == (full.time, full.memory)
            assert plan_view(delta) == plan_view(full)
            current = proposal


def test_the_candidates_are_valid_pipelines_and_only_with_the_flag():
    simulator = simulator_of()
    graph = simulator.graph
    for recompute in (False, True):
        options = SearchOptions(1, enable_pipeline_parallel=True, enable_recomputation=recompute)
        found = {n: s for n, s in initial_candidates(graph, 4, options).items()
                 if n.startswith("pipeline")}
        # 2 and 4 stages; 2, 4 and 8 micro-batches where the batch of 8 allows (2 stages: 2
        # devices a stage, so 2 and 4 micro-batches); GPipe's schedule (1F1B's: the twins)
        plain = {n for n in found if not n.endswith("recomputed")}
        assert plain == {"pipeline, 2 stages x 2 micro-batches",
                         "pipeline, 2 stages x 4 micro-batches",
                         "pipeline, 4 stages x 2 micro-batches",
                         "pipeline, 4 stages x 4 micro-batches",
                         "pipeline, 4 stages x 8 micro-batches"}
        assert len(found) == len(plain) * (2 if recompute else 1)
        for name, strategy in found.items():
            validate(graph, strategy, 4)
            assert max(c.micro_batches for c in strategy.values()) > 1, name
            assert all(c.recompute == name.endswith("recomputed") for c in strategy.values())
            assert not any(c.in_flight for c in strategy.values())
    assert not any(n.startswith("pipeline")
                   for n in initial_candidates(graph, 4, SearchOptions(1)))


def test_a_neighbours_configuration_is_taken_where_it_fits():
    """Between a sample split on devices (2, 3) and a parameter split: the first is taken, the
    second only where parameter splits are enabled; otherwise the layer keeps its own."""
    graph = simulator_of().graph
    names = [layer.name for layer in graph.layers]
    current = data_parallel_strategy(graph, 4)
    before, after = ParallelConfig((2, 1), (2, 3)), ParallelConfig((1, 4), (0, 1, 2, 3))
    current[names[0]], current[names[2]] = before, after
    for parameter, expected in ((False, {before, current[names[1]]}), (True, {before, after})):
        space = SearchSpace(graph, 4, SearchOptions(1, enable_pipeline_parallel=True,
                                                    enable_parameter_parallel=parameter))
        taken = {space.neighbour_config(graph.layers[1], current, random.Random(seed))
                 for seed in range(20)}
        assert taken == expected


def test_under_a_limit_data_parallelism_exceeds_the_search_returns_a_fitting_strategy():
    """Deep equal layers on 4 devices: a pipeline's stage holds a quarter of the weights, data
    parallelism all of them; under a limit between, a search allowed pipelines fits."""
    plain_sim = simulator_of()
    graph = plain_sim.graph
    dp = max(plain_sim.simulate(data_parallel_strategy(graph, 4)).memory)
    piped = max(plain_sim.simulate(pipeline_strategy(graph, 4, 4, 2)).memory)
    assert piped < dp
    machine = small_machine(4, 2)
    kind = next(iter(machine.kinds.values()))
    machine.kinds = {name: replace(kind, memory=(dp + piped) // 2) for name in machine.kinds}
    simulator = simulator_of(machine=machine)
    assert simulator.simulate(data_parallel_strategy(graph, 4)).over
    found = search(simulator, SearchOptions(50, enable_pipeline_parallel=True),
                   stream=io.StringIO())
    assert not simulator.simulate_full(found.best).over
    assert any(name.startswith("pipeline") and cost < found.candidates["data parallel"]
               for name, cost in found.candidates.items())


def test_where_no_gpipe_pipeline_fits_the_search_tries_their_1f1b_twins():
    """The transformer block on 4 devices under a limit that data parallelism and every GPipe
    pipeline exceed (a stage holds all its micro-batches), but which 1F1B's pipelines of 2
    stages fit (the first stage holds 2 micro-batches, the last 1): the twins of the 2
    over-limit pipelines whose stages hold the smallest share of their micro-batches (2 stages
    x 4, 4 stages x 8: a half each; the first the faster) are among the candidates, and the
    search returns a fitting strategy; no twin where the pipelines fit."""
    build = MODELS["transformer_block"]
    plain = simulator_of(build)
    graph = plain.graph
    options = SearchOptions(20, enable_pipeline_parallel=True)
    candidates = initial_candidates(graph, 4, options)
    gpipe = min(max(plain.simulate(s).memory) for n, s in candidates.items()
                if n.startswith("pipeline"))
    twin = max(plain.simulate(pipeline_strategy(graph, 4, 2, 4, schedule="1F1B")).memory)
    assert twin < gpipe and twin < max(plain.simulate(candidates["data parallel"]).memory)
    machine = small_machine(4, 2)
    kind = next(iter(machine.kinds.values()))
    machine.kinds = {name: replace(kind, memory=(twin + gpipe) // 2) for name in machine.kinds}
    simulator = simulator_of(build, machine=machine)
    found = search(simulator, options, stream=io.StringIO())
    assert {n for n in found.candidates if "1F1B" in n} == {
        "pipeline, 2 stages x 4 micro-batches, 1F1B", "pipeline, 4 stages x 8 micro-batches, 1F1B"}
    assert not simulator.simulate_full(found.best).over
    assert one_f_one_b_twins(graph, 4, options, {}) == {}


def test_the_flag_reaches_the_search():
    from flexflow.deployment import plan_options
    assert plan_options(FFConfig(argv=["--enable-pipeline-parallel"])
                        ).search.enable_pipeline_parallel
    assert not plan_options(FFConfig(argv=[])).search.enable_pipeline_parallel


def test_with_pipelines_a_random_configuration_may_run_in_micro_batches():
    """Every count of micro-batches the batch of 8 allows turns up, and every configuration
    drawn is valid for its layer (its degrees divide the output, its devices exist)."""
    from flexflow.scheduler.strategy import check_config
    graph = simulator_of().graph
    space = SearchSpace(graph, 4, SearchOptions(1, enable_pipeline_parallel=True))
    rng = random.Random(0)
    counts = set()
    for layer in graph.layers[:-1]:
        for _ in range(40):
            config = space.random_config(layer, rng)
            check_config(graph, layer, config, 4)
            counts.add(config.micro_batches)
            block = len(set(config.devices))  # a block of devices, repeated per micro-batch
            assert config.devices == config.devices[:block] * config.micro_batches
    assert counts == {1, 2, 4, 8}
