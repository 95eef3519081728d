"""The simulator's collectives, on hand-made task graphs worked out by hand (the machine of
test_simulator.py: kernels and copies free, 0.5 ms per fused task, 1 ms per action, 2 ms per
dependent hop, links of 0.1 ms + 1000 bytes/ms), and the ring model of `Collectives` against
NCCL's figures; then the task graphs of the collective path: delta and full simulations agree,
and data parallelism at the FlexFlow paper's scale scales as NCCL lets it."""

from dataclasses import replace

import pytest

from flexflow.ops.box import Box
from flexflow.scheduler import actions as A
from flexflow.scheduler.machine import (NCCL_LL_NVLINK, NCCL_SIMPLE_NVLINK, Collectives,
                                        RingProtocol, preset)
from flexflow.scheduler.simulator import Simulator
from flexflow.scheduler.strategy import data_parallel_strategy
from flexflow.scheduler.taskgraph import Checks, TaskGraph, TaskKey

from .helpers import compiled, task
from .test_simulator import graph_with, machine

ONE_STEP = Collectives((RingProtocol(base=0.25, step=0.5, network_step=0.5),))


def launch(name: str, device: int, box: Box, deps=()):
    """A task named `name` launching bucket "b" (one weight box) over devices 0 and 1."""
    return task(name, device, A.AllReduce("b", ((0, 0, box),), (0, 1)), deps)


def await_(name: str, device: int, launches):
    return task(name, device, A.AwaitReduced("b", ((0, 0, Box(((0, 250),))),)), launches)


def as_launch(name: str) -> TaskKey:
    return TaskKey(name, "forward", 0, "allreduce")


def test_an_await_waits_for_the_last_launch_and_the_ring_not_for_a_hop():
    box = Box(((0, 250),))  # 1000 bytes
    tasks = [task("x", 0, A.Receive()),
             launch(as_launch("l0"), 0, box, ("x",)),
             task("y1", 1, A.Receive()), task("y2", 1, A.Receive(), ("y1",)),
             launch(as_launch("l1"), 1, box, ("y2",)),
             await_("w0", 0, (as_launch("l0"), as_launch("l1"))),
             await_("w1", 1, (as_launch("l0"), as_launch("l1")))]
    two = replace(machine(2), collectives=ONE_STEP)
    sim = Simulator(graph_with((1,)), None, two).simulate_taskgraph(TaskGraph(tasks))
    names = [p.name for p in sim.plans]
    launched = (names.index("x-forward-d0e0"), names.index("y1-forward-d1e0"))
    assert [p.follows for p in sim.plans if p.awaits] == [launched, launched]  # one barrier
    assert all(not p.receive_from for p in sim.plans)
    # d0: 2 + 0.5 + 1 (x) + 1 (the launch) -> 4.5, launching at 4.5; d1: 2 + 0.5 + 3 -> 5.5, its
    # launch at 5.5. The sum starts at 5.5 and takes 0.25 + 2 steps x (0.5 + 500 bytes /
    # 1000) = 2.25 ms: both awaits are ready at 7.75 (no hop, nothing taken in) and run 1 ms
    assert sim.ends[names.index("w0-forward-d0e1")] == pytest.approx(8.75)
    assert sim.ends[names.index("w1-forward-d1e1")] == pytest.approx(8.75)


def test_a_group_that_launches_what_it_awaits_follows_the_other_launches_only():
    box = Box(((0, 250),))
    tasks = [task("y", 1, A.Receive()), launch(as_launch("l1"), 1, box, ("y",)),
             task("x", 0, A.Receive(), ("y",)), launch(as_launch("l0"), 0, box, ("x",)),
             await_("w0", 0, (as_launch("l0"), as_launch("l1"))),
             await_("w1", 1, (as_launch("l0"), as_launch("l1")))]
    two = replace(machine(2), collectives=ONE_STEP)
    sim = Simulator(graph_with((1,)), None, two).simulate_taskgraph(TaskGraph(tasks))
    names = [p.name for p in sim.plans]
    d1, d0 = names.index("y-forward-d1e0"), names.index("x-forward-d0e1")
    assert [p.follows for p in sim.plans if p.awaits] == [(d1,), (d0, d1)]
    # d0's group, whose await does not wait for itself, runs after y's group ends (4.5) and
    # its message arrives, 6.75 -> 10.25; w1, which only follows it, runs 1 ms from its end
    assert sim.ends[d0] == pytest.approx(10.25)
    assert max(sim.ends) == pytest.approx(11.25)


def test_collectives_of_one_communicator_queue_and_others_do_not():
    box = Box(((0, 250),))
    tasks = [launch(as_launch("a0"), 0, box), launch(as_launch("a1"), 1, box)]
    second = A.AllReduce("c", ((0, 0, box),), (0, 1))
    tasks += [task(as_launch("c0"), 0, second, (as_launch("a0"),)),
              task(as_launch("c1"), 1, second, (as_launch("a1"),))]
    tasks += [task("w0", 0, A.AwaitReduced("c", ((0, 0, box),)),
                   (as_launch("c0"), as_launch("c1")))]
    two = replace(machine(2), collectives=ONE_STEP)
    sim = Simulator(graph_with((1,)), None, two).simulate_taskgraph(TaskGraph(tasks))
    # both launch "b" at 3.5 and "c" at 4.5 (2 + 0.5 + 1, + 1); "b" runs 3.5 -> 5.75, and "c",
    # on the same devices' communicator, after it: 5.75 -> 8.0; the await then runs 1 ms
    assert max(sim.ends) == pytest.approx(9.0)


def test_the_ring_takes_nccl_s_steps_and_the_fastest_protocol():
    collectives = Collectives((NCCL_SIMPLE_NVLINK, NCCL_LL_NVLINK))
    p100 = preset("p100-4x4")
    all16 = tuple(range(16))
    # 16 devices on 4 nodes: 30 steps, 6 of them between nodes; 170 MB at EDR's 12.5 GB/s
    simple = 0.0084 + 24 * 0.0034 + 6 * 0.0096 + 30 / 16 * 170e6 / 12.5e6
    assert collectives.ring_ms(p100.routes, p100.nodes, all16, 170e6) == pytest.approx(simple)
    # a batch norm's statistics (6 KB from each, gathered): 15 steps, 3 between nodes, in LL
    ll = 0.0036 + 12 * 0.00047 + 3 * 0.0027 + 15 * 6144 / (12.5e6 / 4)
    assert collectives.ring_ms(p100.routes, p100.nodes, all16, 6144, gather=True) == \
        pytest.approx(ll)
    assert p100.collective_ms((0, 1), 0) == pytest.approx(0.0036 + 2 * 0.00047)


def mlp(ff):
    x = ff.create_tensor([64, 256])
    t = ff.dense(x, 512)
    ff.softmax(ff.dense(ff.batch_norm_1d(t) if hasattr(ff, "batch_norm_1d") else t, 10))


@pytest.mark.parametrize("collectives", [False, True])
def test_the_delta_simulation_of_the_collective_path_is_the_full_one(collectives):
    ff, objective = compiled(mlp, 64)
    p100 = preset("p100-4x4")
    simulator = Simulator(ff.graph, objective, p100, ff.compiled.loss, ff.optimizer.rule(),
                          Checks(finite_gradients=True, collectives=collectives))
    for n in (2, 4, 16):
        strategy = data_parallel_strategy(ff.graph, n)
        delta, full = simulator.simulate(strategy), simulator.simulate_full(strategy)
        assert (delta.time, delta.memory) == (full.time, full.memory)
        kinds = {type(t.action) for p in full.plans for t in p.tasks}
        assert (A.AllReduce in kinds) == collectives and (A.SendWeightGrad in kinds) != collectives
