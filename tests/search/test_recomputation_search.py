"""Recomputation in the simulator and the search: a recomputed layer's backward costs its
forward again; under a memory limit that only recomputation meets, a search allowed to
recompute returns a strategy that fits; a seed's proposals are unchanged where it is not
allowed; the flag reaches the search."""

from dataclasses import replace

import pytest

from flexflow.core import FFConfig
from flexflow.scheduler import actions as A
from flexflow.scheduler.search import SearchOptions, search
from flexflow.scheduler.simulator import Simulator
from flexflow.scheduler.strategy import data_parallel_strategy

from ..parallel.models import BATCH, MODELS
from .helpers import compiled, small_machine


def recomputing(strategy, names=None):
    return {name: replace(config, recompute=names is None or name in names)
            for name, config in strategy.items()}


def simulator_of(name, machine=None):
    ff, objective = compiled(MODELS[name], BATCH)
    return Simulator(ff.graph, objective, machine or small_machine(1, 1), ff.compiled.loss,
                     ff.optimizer.rule())


def test_a_recomputed_layer_costs_its_forward_again():
    """On one device every task runs after the last: recomputing every layer adds each
    forward's kernel time to the iteration, no more."""
    simulator = simulator_of("transformer_block")
    plain = data_parallel_strategy(simulator.graph, 1)
    again = simulator.simulate_full(recomputing(plain))
    action = simulator.machine.overheads.action  # the task's, which the backward already has
    plans = simulator.simulate_full(plain).plans
    backed = {task.action.layer for p in plans for task in p.tasks
              if isinstance(task.action, A.Backward)}  # (the loss takes softmax's backward)
    forwards = [p.task_ms[i] - action for p in plans for i, task in enumerate(p.tasks)
                if isinstance(task.action, A.Forward) and task.action.layer in backed]
    assert again.time == pytest.approx(simulator.simulate_full(plain).time + sum(forwards))


def test_under_a_limit_only_recomputation_meets_the_search_recomputes_and_fits():
    plain_sim = simulator_of("transformer_block")
    plain = data_parallel_strategy(plain_sim.graph, 1)
    held, recomputed = (plain_sim.simulate_full(s).memory[0]
                        for s in (plain, recomputing(plain)))
    assert recomputed < held
    machine = small_machine(1, 1)
    kind = next(iter(machine.kinds.values()))
    machine.kinds = {name: replace(kind, memory=(held + recomputed) // 2)
                     for name in machine.kinds}
    simulator = simulator_of("transformer_block", machine)
    assert simulator.simulate(plain).over
    allowed = search(simulator, SearchOptions(200, enable_recomputation=True),
                     stream=open("/dev/null", "w"))
    assert not simulator.simulate_full(allowed.best).over
    assert any(config.recompute for config in allowed.best.values())
    refused = search(simulator, SearchOptions(200), stream=open("/dev/null", "w"))
    assert not any(config.recompute for config in refused.best.values())
    assert simulator.simulate_full(refused.best).over


def test_the_flag_reaches_the_search():
    from flexflow.deployment import plan_options
    assert plan_options(FFConfig(argv=["--enable-recomputation"])).search.enable_recomputation
    assert not plan_options(FFConfig(argv=[])).search.enable_recomputation


def test_the_best_strategy_block_marks_a_recomputed_layer():
    import io

    from flexflow.scheduler.search import print_strategy
    simulator = simulator_of("mlp")
    strategy = data_parallel_strategy(simulator.graph, 1)
    first = simulator.graph.layers[0].name
    stream = io.StringIO()
    print_strategy(simulator.graph, recomputing(strategy, {first}), stream)
    lines = stream.getvalue().splitlines()[1:-1]
    assert lines[0].startswith(f"[{first}]") and lines[0].endswith(" recomputed")
    assert not any(line.endswith("recomputed") for line in lines[1:])
