"""Task costs: what the executor's weight updates do under the non-finite guard."""

from dataclasses import replace

import numpy as np
import pytest

from flexflow.deployment import plan_options
from flexflow.scheduler import actions as A
from flexflow.scheduler.calibration.timing import time_kernels
from flexflow.scheduler.planner import Planner
from flexflow.scheduler.simulator import Simulator
from flexflow.scheduler.strategy import data_parallel_strategy
from flexflow.scheduler.taskgraph import Checks

from ..parallel.models import BATCH, mlp
from .helpers import TWO_GPUS_FILE, compiled, small_machine


def update_times(simulation) -> dict:
    """By shard of a weight box: the time of the tasks that sum, test and apply its gradient."""
    times: dict = {}
    for plan in simulation.plans:
        for task, ms in zip(plan.tasks, plan.task_ms):
            if isinstance(task.action, (A.Update, A.CheckShard)):
                shard = (task.key.layer, task.key.part)
                times[shard] = times.get(shard, 0.0) + ms
    return times


@pytest.mark.parametrize("devices", [1, 2])
def test_checked_updates_cost_one_more_pass_over_the_gradient(devices):
    """On one device the update tests its gradient; on two, each shard's owner tests its sum
    in a task of its own (`CheckShard`), before the update waits for both shards' verdicts."""
    ff, objective = compiled(mlp, BATCH)
    machine = small_machine(devices=devices, nodes=1)
    strategy = data_parallel_strategy(ff.graph, devices)
    plain, checked = (Simulator(ff.graph, objective, machine, ff.compiled.loss, ff.optimizer.rule(),
                                Checks(finite_gradients=flag)).simulate_full(strategy)
                      for flag in (False, True))
    kind = machine.kind(0)
    shapes = {(t.key.layer, t.key.part): t.action.shard.shape for p in plain.plans
              for t in p.tasks if isinstance(t.action, A.Update)}
    # the test reads the gradient once: 4 bytes per element at the device's memory bandwidth
    own_task = machine.overheads.action if devices > 1 else 0.0
    extra = {shard: kind.analytic(0, 4 * np.prod(s)) + own_task for shard, s in shapes.items()}
    plain_times = update_times(plain)
    assert update_times(checked) == pytest.approx(
        {shard: ms + extra[shard] for shard, ms in plain_times.items()})
    assert any(isinstance(t.action, A.CheckShard) for p in checked.plans
               for t in p.tasks) == (devices > 1)
    assert checked.time > plain.time


@pytest.mark.parametrize("argv, checked", [([], True), (["--allow-nonfinite"], False)])
def test_the_simulated_graph_checks_gradients_as_the_run_s_does(argv, checked, tmp_path):
    """The planner simulates the graph the executor runs: with --allow-nonfinite neither tests
    a gradient, and the search is charged for no test."""
    ff, objective = compiled(mlp, BATCH, ["--in-process", "-ll:gpu", "2", *argv])
    run_updates = [t.action for t in ff.compiled.executor.taskgraph.tasks
                   if isinstance(t.action, A.Update)]
    assert run_updates and all(u.check_finite == checked for u in run_updates)
    machine_file = tmp_path / "machine.txt"
    machine_file.write_text(TWO_GPUS_FILE)
    options = replace(plan_options(ff.ffconfig), machine_model_version=1,
                      machine_model_file=str(machine_file))
    simulator = Planner(ff.graph, objective, 2, None, options, ff.compiled.loss,
                        ff.optimizer.rule()).simulator_for(ff.strategy)
    simulation = simulator.simulate_full(ff.strategy)
    charged = {call.phase for plan in simulation.plans for task in plan.tasks
               for call in simulator.calls.of_task(task.action, _forward_of(simulation))}
    assert ("check" in charged) == checked


def _forward_of(simulation):
    forwards = {(t.action.layer, t.action.part): t.action for p in simulation.plans
                for t in p.tasks if isinstance(t.action, A.Forward)}
    return lambda layer, part: forwards[(layer, part)]


def test_calibration_times_the_gradient_test():
    ff, objective = compiled(mlp, BATCH)
    simulator = Simulator(ff.graph, objective, small_machine())
    check = simulator.calls.check_call((512, 512))
    assert check.key.startswith("check|") and check.nbytes == 4 * 512 * 512
    [(relative, partial_bytes, kept)] = time_kernels([check], cpu_only=True)
    assert relative > 0 and partial_bytes == 0 and kept < 1 << 20


def test_a_shard_owner_adds_each_gradient_piece_another_holder_sends_in():
    ff, objective = compiled(mlp, BATCH)
    machine = small_machine(devices=2, nodes=1)
    simulator = Simulator(ff.graph, objective, machine, ff.compiled.loss, ff.optimizer.rule())
    simulation = simulator.simulate_full(data_parallel_strategy(ff.graph, 2))
    kind, calls = machine.kind(0), simulator.calls
    for plan in simulation.plans:
        for task, ms in zip(plan.tasks, plan.task_ms):
            if isinstance(task.action, A.Update):
                shape = task.action.shard.shape
                assert task.action.incoming == 1  # data parallel over two devices: one other
                update, add = calls.update_call(shape), calls.sum_call(shape)
                # an add reads two gradients and writes one
                assert add.nbytes == 3 * 4 * np.prod(shape)
                assert ms == pytest.approx(machine.overheads.action
                                           + kind.analytic(update.flops, update.nbytes)
                                           + kind.analytic(add.flops, add.nbytes))
