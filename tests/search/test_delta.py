"""Delta simulation gives exactly the full simulation's result (rebuild + executor.fuse), on
random proposal sequences over every test model, with every kind of split enabled, with and
without recomputation among the proposals."""

import random

import pytest

from flexflow.scheduler.search import SearchOptions, SearchSpace
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


@pytest.mark.parametrize("recomputation", [False, True])
@pytest.mark.parametrize("name", list(BUILDS))
def test_delta_equals_full_on_random_proposals(name, recomputation):
    ff, objective = compiled(BUILDS[name], BATCH)
    graph = ff.graph
    simulator = Simulator(graph, objective, small_machine(), ff.compiled.loss, ff.optimizer.rule(),
                          Checks(finite_gradients=True))
    space = SearchSpace(graph, 4, SearchOptions(1, enable_parameter_parallel=True,
                                                enable_attribute_parallel=True,
                                                enable_recomputation=recomputation))
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
    assert posted_early == (name == "wide_mlp")


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
