"""The MCMC search: it finds the best strategy of a space small enough to enumerate, honours
the flags, is deterministic for a seed, and prints FlexFlow's lines."""

import gc
import io
import itertools
import math

import pytest

from flexflow.ops.spec import DimKind
from flexflow.scheduler.search import (BEST_FOOTER, BEST_HEADER, SearchOptions, SearchSpace,
                                       one_weird_trick, print_strategy, search)
from flexflow.scheduler.simulator import Simulator
from flexflow.scheduler.strategy import ParallelConfig, data_parallel_strategy

from ..parallel.models import BATCH, cnn_batch_norm, mlp
from .helpers import compiled, small_machine

# The optimum (everything on one device) is four uphill single-layer moves away from data
# parallelism, and FlexFlow's search returns to the best every budget/100 proposals: it needs a
# budget of thousands and a temperature that lets it climb (alpha 0.2: +4 ms accepted 45%).
FLAGS = SearchOptions(budget=3000, alpha=0.2, enable_parameter_parallel=True, seed=0)


def every_config(space: SearchSpace, layer):
    """All configurations a proposal can give `layer`: degrees x contiguous placements."""
    for degrees in space.degrees(layer):
        parts = math.prod(degrees)
        for start in range(space.num_devices - parts + 1):
            yield ParallelConfig(degrees, tuple(range(start, start + parts)))


@pytest.fixture(scope="module")
def toy():
    ff, objective = compiled(mlp, BATCH)
    simulator = Simulator(ff.graph, objective, small_machine(devices=2, nodes=1, cores=None),
                          ff.compiled.loss, ff.optimizer.rule())
    return ff.graph, simulator


def test_search_finds_the_exhaustive_optimum(toy):
    graph, simulator = toy
    space = SearchSpace(graph, 2, FLAGS)
    last = graph.layers[-1]
    fixed = data_parallel_strategy(graph, 2)[last.name]  # proposals never change the last layer
    layers = graph.layers[:-1]
    choices = [list(every_config(space, layer)) for layer in layers]
    costs = []
    for combo in itertools.product(*choices):
        strategy = {layer.name: c for layer, c in zip(layers, combo)}
        strategy[last.name] = fixed
        costs.append(simulator.simulate_full(strategy).cost)
    assert len(costs) == 192
    result = search(simulator, FLAGS, stream=io.StringIO())
    assert result.best_cost == min(costs)
    assert simulator.simulate_full(result.best).cost == min(costs)
    assert min(costs) < result.candidates["data parallel"]  # the toy machine rewards searching


def test_same_seed_same_result_and_flexflows_lines(toy):
    graph, simulator = toy
    out = io.StringIO()
    first = search(simulator, SearchOptions(budget=150, seed=7), stream=out)
    again = search(simulator, SearchOptions(budget=150, seed=7), stream=io.StringIO())
    assert (first.best, first.best_cost) == (again.best, again.best_cost)
    lines = out.getvalue().splitlines()
    assert lines[0] == "MCMC search configuration: budget(150) alpha(1.00000000) mode(TRAINING)"
    assert lines[2].startswith("iteration(0) current_strategy(")
    printed = io.StringIO()
    print_strategy(graph, {**first.best, graph.layers[0].name: ParallelConfig((2, 1), (0, 1))},
                   printed)
    block = printed.getvalue().splitlines()
    assert block[0] == BEST_HEADER and block[-1] == BEST_FOOTER
    assert block[1] == f"[{graph.layers[0].name}] num_dims(2) dims[1,2] device_ids[0,1]"


def test_reset_to_best_and_observer(toy):
    graph, simulator = toy
    seen = []
    result = search(simulator, SearchOptions(budget=99, seed=1), stream=io.StringIO(),
                    observer=lambda current, best: seen.append((current, best)))
    assert len(seen) == result.proposals == 100
    assert all(b1 >= b2 for (_, b1), (_, b2) in zip(seen, seen[1:]))  # best never worsens


@pytest.mark.parametrize("parameter, attribute", [(False, False), (True, False), (False, True),
                                                  (True, True)])
def test_proposals_split_only_enabled_kinds(parameter, attribute):
    ff, _ = compiled(cnn_batch_norm, BATCH)
    options = SearchOptions(1, enable_parameter_parallel=parameter,
                            enable_attribute_parallel=attribute)
    space = SearchSpace(ff.graph, 4, options)
    allowed = {DimKind.SAMPLE} | ({DimKind.PARAMETER} if parameter else set()) | (
        {DimKind.ATTRIBUTE} if attribute else set())
    used = set()
    for layer in ff.graph.layers:
        kinds = layer.op.dim_kinds(ff.graph.in_specs(layer))
        for degrees in space.degrees(layer):
            assert math.prod(degrees) <= 4
            used |= {kinds[d] for d, n in enumerate(degrees) if n > 1}
    assert used == allowed


def test_one_weird_trick_splits_dense_layers_by_features():
    ff, _ = compiled(cnn_batch_norm, BATCH)
    strategy = one_weird_trick(ff.graph, 4)
    for layer in ff.graph.layers:
        degrees = strategy[layer.name].degrees
        if layer.type_name == "Dense":
            assert degrees == (1, 4)
        else:
            assert degrees == (4,) + (1,) * (len(degrees) - 1)


def test_the_collector_waits_for_the_search_and_is_restored(toy):
    """Full collections walk the simulator's caches; a search runs with the cyclic collector
    off and leaves it as it found it, also when it fails."""
    _, simulator = toy
    during = []
    search(simulator, SearchOptions(budget=3), stream=io.StringIO(),
           observer=lambda current, best: during.append(gc.isenabled()))
    assert during == [False] * 4 and gc.isenabled()

    def failing(current, best):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        search(simulator, SearchOptions(budget=3), stream=io.StringIO(), observer=failing)
    assert gc.isenabled()
    gc.disable()
    try:
        search(simulator, SearchOptions(budget=3), stream=io.StringIO())
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
