"""Delta simulation gives exactly the full simulation's result (rebuild + executor.fuse), on
random proposal sequences over every test model, with every kind of split enabled, with and
without recomputation and weight sharding among the proposals (and sharding with the
collectives, whose buckets leave sharded boxes out); and a whole search with the delta
simulation visits the same proposals, scores them the same and returns the same strategy as one
that rebuilds every proposal."""

import io
import random
from dataclasses import replace

import pytest

from flexflow.scheduler.machine import preset
from flexflow.scheduler.search import SearchOptions, SearchSpace, search
from flexflow.scheduler.simulator import Simulator
from flexflow.scheduler.taskgraph import Checks
from flexflow.scheduler.strategy import data_parallel_strategy

from ..parallel.models import BATCH, MODELS, wide_mlp
from .helpers import compiled, small_machine

STEPS = 25


def plan_view(simulation):
    return [(p.name, p.device, p.cost, p.sent, p.feeds, p.receive_from, p.after, p.early)
            for p in simulation.plans]


BUILDS = {**MODELS, "wide_mlp": wide_mlp}  # the last one's updates post messages early


# (recomputation, weight sharding, collectives) among the proposals
VARIANTS = {"plain": (False, False, False), "recomputation": (True, False, False),
            "sharding": (False, True, False), "sharding, collectives": (True, True, True)}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("name", list(BUILDS))
def test_delta_equals_full_on_random_proposals(name, variant):
    recomputation, sharding, collectives = VARIANTS[variant]
    ff, objective = compiled(BUILDS[name], BATCH)
    graph = ff.graph
    simulator = Simulator(graph, objective, small_machine(), ff.compiled.loss, ff.optimizer.rule(),
                          Checks(finite_gradients=True, collectives=collectives))
    space = SearchSpace(graph, 4, SearchOptions(1, enable_parameter_parallel=True,
                                                enable_attribute_parallel=True,
                                                enable_recomputation=recomputation,
                                                enable_weight_sharding=sharding))
    rng = random.Random(hash(name) % 1000)
    current = data_parallel_strategy(graph, 4)
    posted_early = False
    for _ in range(STEPS):
        proposal = dict(current)
        for _ in range(rng.choice([1, 1, 2])):  # mostly one-op changes, sometimes two
            layer = graph.layers[rng.randrange(len(graph.layers) - 1)]
            proposal[layer.name] = space.random_config(layer, rng)
        delta, full = simulator.simulate(proposal), simulator.simulate_full(proposal)
        assert delta.time == full.time
        assert delta.memory == full.memory
        assert plan_view(delta) == plan_view(full)
        posted_early |= any(plan.early for plan in full.plans)
        if rng.random() < 0.5:
            current = proposal
    # (with the collectives every gradient is summed by them, sharded boxes' too: nothing
    # is sent early)
    assert posted_early == (name == "wide_mlp" and not collectives)


def test_groups_are_named_after_their_first_layer_task_not_a_load():
    """A device's first group starts by loading its batch (`input0-load`); it carries the name
    of the first layer it runs, in the full and the delta simulation alike."""
    ff, objective = compiled(MODELS["mlp"], BATCH)
    simulator = Simulator(ff.graph, objective, small_machine(), ff.compiled.loss,
                          ff.optimizer.rule())
    strategy = data_parallel_strategy(ff.graph, 2)
    first_layer = ff.graph.layers[0].name
    for simulation in (simulator.simulate_full(strategy), simulator.simulate(strategy)):
        names = [p.name for p in simulation.plans]
        assert f"{first_layer}-forward-d0e0" in names and f"{first_layer}-forward-d1e0" in names
        assert not any(name.startswith("input") for name in names), names


SEARCH_BUDGET = 300


def scored(simulator, simulate):
    """The simulator's `simulate` and `simulate_full` replaced by `simulate` that also lists
    (proposal, time, memory, plans) for every strategy the search scores; returns the list."""
    seen = []

    def recorded(strategy):
        simulation = simulate(strategy)
        seen.append((dict(strategy), simulation.time, simulation.memory, plan_view(simulation)))
        return simulation
    simulator.simulate = simulator.simulate_full = recorded
    return seen


@pytest.mark.parametrize("machine", ["small", "p100-4x4"])
@pytest.mark.parametrize("name", ["cnn_batch_norm", "residual_block"])
def test_a_delta_search_is_the_full_search(name, machine):
    """Hundreds of proposals of the search as the paper table runs it (parameter and attribute
    parallelism; buckets all-reduced and gradients checked, whose update segments the delta
    simulation remembers across buckets), on a machine whose nodes share cores and on one
    whose devices do not: the same proposals, each with the same time, memory and groups, and
    the same best strategy and cost."""
    ff, objective = compiled(MODELS[name], BATCH)
    options = SearchOptions(SEARCH_BUDGET, enable_parameter_parallel=True,
                            enable_attribute_parallel=True)
    runs = []
    for delta in (True, False):
        simulator = Simulator(ff.graph, objective,
                              small_machine() if machine == "small" else preset(machine),
                              ff.compiled.loss, ff.optimizer.rule(),
                              Checks(finite_gradients=True, collectives=True))
        seen = scored(simulator, simulator.simulate if delta else simulator.simulate_full)
        result = search(simulator, replace(options, delta=delta), stream=io.StringIO())
        runs.append((seen, result.best, result.best_cost))
    (delta_seen, *delta_result), (full_seen, *full_result) = runs
    assert len(delta_seen) == len(full_seen) > SEARCH_BUDGET // 2  # (those changing nothing
    #                                                                  are not simulated)
    for step, (fast, slow) in enumerate(zip(delta_seen, full_seen)):
        assert fast == slow, f"proposal {step}"
    assert delta_result == full_result
    assert len({(time, tuple(memory)) for _, time, memory, _ in delta_seen}) > 10


def tied_mlp(ff):
    """Two dense layers of one kernel (`shared_op`): a weight box two layers use."""
    x = ff.create_tensor([BATCH, 16])
    first = ff.dense(x, 16)
    ff.softmax(ff.dense(ff.dense(first, 16, shared_op=first.owner_op), 4))


@pytest.mark.parametrize("name", ["tied_mlp", "residual_block"])
def test_weight_holders_are_every_partition_using_a_box_in_layer_order(name):
    """The builder merges a strategy's weight holders from memoised per-layer uses; they are
    what a walk over every partition of every layer finds: the devices using each box, first
    user first, a box two layers use held by the devices of both."""
    ff, objective = compiled(tied_mlp if name == "tied_mlp" else MODELS[name], BATCH)
    graph = ff.graph
    simulator = Simulator(graph, objective, small_machine(), ff.compiled.loss,
                          ff.optimizer.rule())
    builder = simulator.builder
    space = SearchSpace(graph, 4, SearchOptions(1, enable_parameter_parallel=True))
    rng = random.Random(7)
    merged_from_both = 0  # strategies in which two layers use one box
    for _ in range(40):
        strategy = {layer.name: space.random_config(layer, rng) for layer in graph.layers}
        walked: dict = {}
        for layer in graph.layers:
            for part in builder.parts(layer.index, strategy[layer.name]):
                for wkey in part.action.weight_keys:
                    holders = walked.setdefault(wkey, [])
                    holders += [] if part.device in holders else [part.device]
        assert builder.weight_devices(strategy) == walked
        users = {k: [i for i in range(len(graph.layers)) if any(
            k in p.action.weight_keys for p in builder.parts(i, strategy[graph.layers[i].name]))]
            for k in walked}
        merged_from_both += any(len(u) > 1 for u in users.values())
    assert (merged_from_both > 0) == (name == "tied_mlp")
