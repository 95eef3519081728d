"""Sharded weights in the simulator and the search: a sharded strategy's gathers are messages
the simulator charges; under a memory limit data parallelism exceeds, a search allowed to shard
returns a sharded strategy that fits; a seed's proposals are unchanged where it is not allowed;
the candidates, the flag and the best-strategy block."""

import io
import math
import random
from dataclasses import replace

from flexflow.core import FFConfig
from flexflow.scheduler import actions as A
from flexflow.scheduler.search import (SearchOptions, SearchSpace, initial_candidates,
                                       print_strategy, search)
from flexflow.scheduler.simulator import Simulator
from flexflow.scheduler.strategy import data_parallel_strategy

from ..parallel.models import BATCH
from ..parallel.test_weight_sharding import deep_mlp
from .helpers import compiled, small_machine


def sharding(strategy):
    return {name: replace(config, shard_weights=True) for name, config in strategy.items()}


def simulator_of(machine=None):
    ff, objective = compiled(deep_mlp, BATCH)
    return Simulator(ff.graph, objective, machine or small_machine(4, 1), ff.compiled.loss,
                     ff.optimizer.rule())


def test_a_sharded_strategy_sends_the_gathers_and_holds_less():
    """Data parallel on 4 devices: the sharded strategy's plans send more bytes (each holder
    receives three quarters of each box before its forward and its backward, and sends no new
    values after the update), and its devices hold less."""
    simulator = simulator_of()
    plain = data_parallel_strategy(simulator.graph, 4)
    before, after = simulator.simulate_full(plain), simulator.simulate_full(sharding(plain))
    graph = simulator.builder.build(sharding(plain))
    gathers = [t for t in graph.tasks if isinstance(t.action, A.SendShard)]
    boxes = len(graph.sharded)
    assert len(gathers) == boxes * 2 * 4 * 3  # (forward and backward, 4 holders, 3 others)
    assert not any(isinstance(t.action, A.SendWeight) for t in graph.tasks)
    def sent(simulation):
        return sum(sum(plan.sent.values()) + sum(n for messages in plan.early.values()
                                                 for _, n in messages)
                   for plan in simulation.plans)
    weights = sum(key[2].volume * 4 for key in graph.sharded)
    # the gathers (2 x 3/4 of each box to each of 4 holders) in place of the all-gather's
    assert sent(after) - sent(before) == 4 * weights * 3 // 4
    assert max(after.memory) < max(before.memory)


def test_under_a_limit_data_parallelism_exceeds_the_search_may_shard_and_fits():
    """Between data parallelism and its sharded form: the search allowed to shard returns a
    strategy that fits and shards (operator placement fits too on this model, so the search
    without sharding may fit as well: it never shards)."""
    plain_sim = simulator_of()
    plain = data_parallel_strategy(plain_sim.graph, 4)
    held, shard = (max(plain_sim.simulate_full(s).memory) for s in (plain, sharding(plain)))
    assert shard < held
    machine = small_machine(4, 1)
    kind = next(iter(machine.kinds.values()))
    machine.kinds = {name: replace(kind, memory=(held + shard) // 2) for name in machine.kinds}
    simulator = simulator_of(machine)
    assert simulator.simulate(plain).over
    allowed = search(simulator, SearchOptions(100, enable_weight_sharding=True),
                     stream=io.StringIO())
    assert not simulator.simulate_full(allowed.best).over
    assert any(config.shard_weights for config in allowed.best.values())
    refused = search(simulator, SearchOptions(100), stream=io.StringIO())
    assert not any(config.shard_weights for config in refused.best.values())


def test_the_candidates_shard_every_weighted_layer_and_recompute_where_allowed():
    simulator = simulator_of()
    graph = simulator.graph
    weighted = {layer.name for layer in graph.layers if layer.weights}
    for recompute in (False, True):
        options = SearchOptions(1, enable_weight_sharding=True, enable_recomputation=recompute)
        candidate = initial_candidates(graph, 4, options)["data parallel, sharded"]
        assert {name for name, c in candidate.items() if c.shard_weights} == weighted
        assert all(c.recompute == recompute for c in candidate.values())
    assert "data parallel, sharded" not in initial_candidates(graph, 4, SearchOptions(1))


def test_proposals_shard_only_weighted_layers_and_a_seed_is_unchanged_without_the_flag():
    """With the flags off a proposal draws FlexFlow's two numbers (the degrees, the first
    device) and nothing else, so a seed's proposals are those of the search before these
    choices existed; with sharding on, only layers with weights are sharded."""
    graph = simulator_of().graph
    layers = graph.layers
    space = SearchSpace(graph, 4, SearchOptions(1))
    rng, bare = random.Random(3), random.Random(3)
    for _ in range(200):
        layer = layers[rng.randrange(len(layers))]
        assert layers[bare.randrange(len(layers))] is layer
        config = space.random_config(layer, rng)
        degrees = bare.choice(space.degrees(layer))
        start = bare.randrange(4 - math.prod(degrees) + 1)
        assert (config.degrees, config.devices[0], config.recompute, config.shard_weights) == (
            degrees, start, False, False)
    assert rng.getstate() == bare.getstate()
    space = SearchSpace(graph, 4, SearchOptions(1, enable_weight_sharding=True))
    rng = random.Random(3)
    drawn = [(layer, space.random_config(layer, rng))
             for layer in (layers[rng.randrange(len(layers))] for _ in range(200))]
    sharded = [layer for layer, c in drawn if c.shard_weights]
    assert sharded and all(layer.weights for layer in sharded)


def test_without_pipelines_the_search_never_proposes_a_neighbours_configuration(monkeypatch):
    def refuse(*args):
        raise AssertionError("a neighbour's configuration was proposed")
    monkeypatch.setattr(SearchSpace, "neighbour_config", refuse)
    search(simulator_of(), SearchOptions(50, enable_weight_sharding=True,
                                         enable_recomputation=True), stream=io.StringIO())


def test_the_flag_reaches_the_search():
    from flexflow.deployment import plan_options
    assert plan_options(FFConfig(argv=["--enable-weight-sharding"])).search.enable_weight_sharding
    assert not plan_options(FFConfig(argv=[])).search.enable_weight_sharding


def test_the_best_strategy_block_marks_a_sharded_layer():
    simulator = simulator_of()
    strategy = data_parallel_strategy(simulator.graph, 4)
    first = simulator.graph.layers[0].name
    strategy[first] = replace(strategy[first], shard_weights=True)
    stream = io.StringIO()
    print_strategy(simulator.graph, strategy, stream)
    lines = stream.getvalue().splitlines()[1:-1]
    assert lines[0].startswith(f"[{first}]") and lines[0].endswith(" sharded weights")
    assert not any(line.endswith("sharded weights") for line in lines[1:])
