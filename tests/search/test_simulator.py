"""The simulator on hand-made task graphs whose iteration times are worked out by hand.

Machine: kernels and copies free (huge peak and bandwidth), 0.5 ms per fused task, 1 ms per
action, 2 ms per dependent hop, 3 ms per iteration, links of 0.1 ms + 1000 bytes/ms."""

from dataclasses import replace

import pytest

from flexflow.ops.box import Box
from flexflow.ops.graph import Graph
from flexflow.ops.spec import TensorSpec
from flexflow.scheduler import actions as A
from flexflow.scheduler.machine import DeviceKind, Hop, MachineModel, Overheads
from flexflow.scheduler.simulator import (GroupPlan, Simulation, Simulator, check_memory,
                                          schedule)
from flexflow.scheduler.strategy import StrategyError
from flexflow.scheduler.taskgraph import TaskGraph

from .helpers import task

FREE = DeviceKind("free", 1 << 30, 1e30, 1e30)
OVERHEADS = Overheads(task=0.5, action=1.0, hop=2.0, iteration=3.0)


def machine(devices: int, shared_link: bool = False, cores: float | None = None) -> MachineModel:
    routes = {(s, d): (Hop(("nic",) if shared_link else (f"l{s}{d}",), 0.1, 1000.0),)
              for s in range(devices) for d in range(devices) if s != d}
    host = tuple((Hop(("client",), 0.1, 1000.0),) for _ in range(devices))
    return MachineModel({"free": FREE}, ("free",) * devices, (0,) * devices, routes, host,
                        OVERHEADS, cores)


def graph_with(*shapes) -> Graph:
    graph = Graph()
    for shape in shapes:
        graph.add_input(TensorSpec(shape))
    return graph


def simulate(graph, tasks, devices, **kwargs):
    simulator = Simulator(graph, None, machine(devices, **kwargs))
    return simulator.simulate_taskgraph(TaskGraph(list(tasks)))


def send(tensor, elements, dst):
    return A.Send(tensor, Box(((0, elements),)), dst, False)


def bookings(simulation):
    """The recorded transfers as (resources, their start and end times flattened)."""
    return ([t.resource for t in simulation.transfers],
            [ms for t in simulation.transfers for ms in (t.start, t.end)])


def test_chain_across_devices_waits_for_hops_and_transfers():
    # d0: a, b (sends 1000 bytes to d1) | d1: c | d0: d  ->  three fused tasks in a chain
    tasks = [task("a", 0, A.Receive()),
             task("b", 0, send(0, 250, 1), ("a",)),
             task("c", 1, A.Receive(), ("b",)),
             task("d", 0, A.Receive(), ("c",))]
    sim = simulate(graph_with((250,)), tasks, 2)
    # group 1: dispatched at 2, runs 0.5 + 1 + 1 -> ends 4.5
    # group 2: dispatched 4.5 + 2, fetches 1000 bytes (0.1 + 1) -> runs 7.6 .. 9.1
    # group 3: dispatched 9.1 + 2, fetches an empty output (0.1) -> runs 11.2 .. 12.7
    assert [p.device for p in sim.plans] == [0, 1, 0]
    assert sim.ends == pytest.approx([4.5, 9.1, 12.7])
    assert sim.time == pytest.approx(12.7 + 3.0)


def test_a_shared_link_serves_transfers_first_come_first_served():
    # d0 sends 1000 bytes to each of d1 and d2: each receives its own 1000 (the executor pushes
    # each device its part of a group's output)
    tasks = [task("a", 0, send(0, 250, 1)),
             task("b", 0, send(0, 250, 2)),
             task("c", 1, A.Receive(), ("a",)),
             task("d", 2, A.Receive(), ("b",))]
    dedicated = simulate(graph_with((250,)), tasks, 3)
    shared = simulate(graph_with((250,)), tasks, 3, shared_link=True)
    # d0 runs 2 .. 4.5; both fetches start at 6.5 and take 1.1 ms
    assert dedicated.ends[1:] == pytest.approx([7.6 + 1.5, 7.6 + 1.5])
    # on one link the second waits for the first: 6.5 .. 7.6, then 7.6 .. 8.7
    assert shared.ends[1:] == pytest.approx([7.6 + 1.5, 8.7 + 1.5])
    assert shared.time == pytest.approx(10.2 + 3.0)


def test_a_message_posted_early_leaves_when_its_task_ends():
    shard = Box(((0, 512), (0, 512)))  # 1 MiB of float32: actions.EARLY_SEND_BYTES
    tasks = [task("g", 0, A.SendWeightGrad((0, 0, shard), 1, shard)),
             task("x", 0, A.Receive(), ("g",)),
             task("y", 0, A.Receive(), ("x",)),
             task("c", 1, A.Receive(), ("g",))]
    sim = simulate(graph_with((1,)), tasks, 2)
    assert A.sent_early(tasks[0].action)
    # (1 ms into its tasks' cost: the group's own 0.5 ms come before its tasks)
    assert sim.plans[0].early == {1: [(1.0, 512 * 512 * 4)]} and sim.plans[0].sent == {}
    # d0 runs 2 .. 5.5; the gradient leaves when its task ends (2 + 0.5 + 1) and takes
    # 0.1 + 1048.576 ms; d1's group, ready at 7.5, takes the closing parcel after it
    arrived = 3.5 + 0.1 + 1048.576
    assert sim.ends[1] == pytest.approx(arrived + 0.1 + 1.5)


def test_recorded_transfers_are_the_link_bookings():
    tasks = [task("a", 0, send(0, 250, 1)),
             task("b", 0, send(0, 250, 2)),
             task("c", 1, A.Receive(), ("a",)),
             task("d", 2, A.Receive(), ("b",)),
             task("load", 2, A.Load(1, Box(((0, 500),))), ("d",))]
    graph = graph_with((250,), (1000,))
    simulator = Simulator(graph, None, machine(3, shared_link=True))
    plain = simulator.simulate_taskgraph(TaskGraph(tasks))
    recorded = simulator.simulate_taskgraph(TaskGraph(tasks), record_transfers=True)
    assert plain.transfers == []
    assert (recorded.starts, recorded.ends, recorded.time) == (plain.starts, plain.ends,
                                                               plain.time)
    # the two fetches of d0's 1000 bytes each share the link one after the other (as in the test
    # above); d2's fused task, dispatched at 6.5, also loads its box of the batch, 2000 bytes,
    # over the client's route meanwhile: 0.1 + 2 ms
    assert bookings(recorded) == (["nic", "nic", "client"],
                                  pytest.approx([6.5, 7.6, 7.6, 8.7, 6.5, 8.6]))


def test_a_transfer_books_every_hop_of_its_route():
    nodes = MachineModel({"free": FREE}, ("free",) * 2, (0, 1),
                         {(0, 1): (Hop(("out0",), 0.1, 1000.0), Hop(("in1", "bus"), 0.2, 500.0)),
                          (1, 0): (Hop(("out1",), 0.1, 1000.0),)},
                         tuple((Hop(("client",), 0.1, 1000.0),) for _ in range(2)), OVERHEADS)
    tasks = [task("a", 0, send(0, 250, 1)),
             task("b", 1, A.Receive(), ("a",))]
    sim = Simulator(graph_with((250,)), None, nodes).simulate_taskgraph(TaskGraph(tasks), True)
    # d0 runs 2 .. 3.5; the fetch, dispatched at 5.5, leaves in 0.1 + 1 ms, then holds both
    # resources of the second hop for 0.2 + 2 ms
    assert bookings(sim) == (["out0", "in1", "bus"], pytest.approx([5.5, 6.6, 6.6, 8.8, 6.6, 8.8]))
    assert sim.ends[1] == pytest.approx(8.8 + 1.5)


def test_devices_sharing_cores_share_them_fairly():
    tasks = [task("a", 0, A.Receive()), task("b", 1, A.Receive())]
    free = simulate(graph_with((1,)), tasks, 2)
    one_core = simulate(graph_with((1,)), tasks, 2, cores=1)
    fraction = simulate(graph_with((1,)), tasks, 2, cores=1.5)
    # both ready at 2 with 1.5 ms of work: alone, at half speed, at three quarters
    assert free.ends == pytest.approx([3.5, 3.5])
    assert one_core.ends == pytest.approx([5.0, 5.0])
    assert fraction.ends == pytest.approx([4.0, 4.0])


def test_a_group_speeds_up_when_the_one_sharing_its_core_ends():
    tasks = [task("a", 0, A.Receive()), task("a2", 0, A.Receive(), ("a",)),
             task("b", 1, A.Receive())]
    sim = simulate(graph_with((1,)), tasks, 2, cores=1)
    # from 2, a (2.5 ms of work) and b (1.5) each run at half speed; b is done at 5, when a has
    # 1 ms left, which it does alone by 6
    assert sim.starts == pytest.approx([2.0, 2.0]) and sim.ends == pytest.approx([6.0, 5.0])


@pytest.mark.parametrize("cores", [None, 2])
def test_a_device_runs_its_groups_one_at_a_time_in_order(cores):
    # two groups of device 0 ready at once; the first, where the program starts, takes the
    # per-task 0.5 ms first, the second (it takes in no message) runs straight on
    plans = [GroupPlan("p", 0, 1.0, {}, 0.0, (), ()), GroupPlan("q", 0, 2.0, {}, 0.0, (), ())]
    starts, ends = schedule(plans, machine(2, cores=cores))
    assert starts == pytest.approx([2.0, 3.5]) and ends == pytest.approx([3.5, 5.5])


def test_the_scheduler_dispatches_one_task_at_a_time():
    tasks = [task("a", 0, A.Receive()), task("b", 1, A.Receive())]
    busy = machine(2)
    busy.overheads = replace(OVERHEADS, scheduler=1.0)
    sim = Simulator(graph_with((1,)), None, busy).simulate_taskgraph(TaskGraph(tasks))
    # both are ready at 2; the scheduler spends 1 ms on each in turn, then each runs 1.5 ms
    assert sim.starts == pytest.approx([3.0, 4.0])
    assert sim.ends == pytest.approx([4.5, 5.5])


def test_the_scheduler_hands_each_device_its_program_once():
    """Only a device's program passes through the scheduler; the groups of the programs then
    wait for each other's outputs, pushed from worker to worker."""
    tasks = [task("a", 0, send(0, 1, 1)),
             task("b", 1, send(0, 1, 0), ("a",)),
             task("c", 0, A.Receive(), ("b",))]
    busy = machine(2)
    busy.overheads = replace(OVERHEADS, scheduler=1.0)
    sim = Simulator(graph_with((1,)), None, busy).simulate_taskgraph(TaskGraph(tasks))
    # the programs reach d0 at 3 and d1 at 4; a runs 3 -> 4.5; b one hop (2 ms) and the fetch
    # of 4 bytes (0.104 ms) later, 6.604 -> 8.104, and c as much after b: no scheduler time for
    # b or c
    assert sim.starts == pytest.approx([3.0, 6.604, 10.208])
    assert sim.ends == pytest.approx([4.5, 8.104, 11.708])


def test_the_scheduler_shares_the_cores_with_the_groups_running_there():
    # one core for two devices; the scheduler spends 1 ms per dispatch when the core is free
    shared = machine(2, cores=1)
    shared.overheads = replace(OVERHEADS, scheduler=1.0)
    tasks = [task("a", 0, A.Receive()), task("a2", 0, A.Receive(), ("a",)),
             task("b", 1, A.Receive())]
    # a is dispatched 2 -> 3 (nothing running) and starts its 2.5 ms of work alone; b's
    # dispatch shares the core with a: 2 ms, 3 -> 5; from 5 a (0.5 ms left) and b (1.5 ms)
    # run at half speed: a ends at 6, b (1 ms left) then alone at 7
    sim = Simulator(graph_with((1,)), None, shared).simulate_taskgraph(TaskGraph(tasks))
    assert sim.starts == pytest.approx([3.0, 5.0]) and sim.ends == pytest.approx([6.0, 7.0])


def test_a_hop_that_starts_while_the_cores_are_busy_takes_longer():
    tasks = [task("a", 0, A.Receive()),
             task("c", 1, A.Receive()), task("c2", 1, A.Receive(), ("c",)),
             task("b", 2, A.Receive(), ("a",))]
    sim = simulate(graph_with((1,)), tasks, 3, cores=1)
    # a (1.5 ms of work) and c (2.5) share the core from 2: a ends at 5, c at 6; b's hop starts
    # at 5 beside c: 2 x 2 ms, then 0.1 ms to fetch a's output, and 1.5 ms alone
    assert sim.starts == pytest.approx([2.0, 2.0, 9.1])
    assert sim.ends == pytest.approx([5.0, 6.0, 10.6])


def test_a_transfer_that_starts_while_the_cores_are_busy_takes_longer():
    tasks = [task("a", 0, send(0, 250, 1)),
             task("c", 2, A.Receive())]
    tasks += [task(f"c{k}", 2, A.Receive(), (tasks[-1].key,)) for k in range(5)]
    tasks.append(task("b", 1, A.Receive(), ("a",)))
    sim = simulate(graph_with((250,)), tasks, 3, cores=1)
    # a (1.5 ms of work) and c (6.5) share the core from 2: a ends at 5; b's hop beside c takes
    # 2 x 2 ms, and at 9 its 1000 bytes 2 x (0.1 + 1) ms; c ends at 10, b runs alone from 11.2
    assert sim.starts == pytest.approx([2.0, 2.0, 11.2])
    assert sim.ends == pytest.approx([5.0, 10.0, 12.7])


def test_metrics_cost_no_task_of_their_own():
    # DaskExecutor.run takes the metric records from the workers once the iteration is done,
    # which the per-iteration overhead covers: a loss group is just a group
    plain = simulate(graph_with((1,)), [task("a", 0, A.Receive())], 1)
    loss = simulate(graph_with((1,)), [task("a", 0, A.Receive(), phase="loss")], 1)
    assert [p.name for p in loss.plans] == ["a-forward-d0e0"]
    assert loss.ends == plain.ends == pytest.approx([3.5])
    assert loss.time == plain.time == pytest.approx(6.5)


def test_loaded_batches_come_over_the_clients_route():
    graph = graph_with((1000,))  # 4000 bytes, of which the task loads its box's 2000
    tasks = [task("load", 0, A.Load(0, Box(((0, 500),))))]
    sim = simulate(graph, tasks, 1)
    # dispatched at 2, the box arrives 0.1 + 2 ms later, then 0.5 + 1 ms of work
    assert sim.ends == pytest.approx([2 + 2.1 + 1.5])


def test_memory_over_capacity_is_penalised_and_reported():
    fits = Simulation(10.0, [1 << 20, 2 << 20], [4 << 20, 4 << 20])
    over = Simulation(10.0, [6 << 20, 2 << 20], [4 << 20, 4 << 20])
    assert fits.cost == 10.0 and fits.over == []
    assert over.penalty == pytest.approx((2 << 20) / 1e6)  # FlexFlow: 1 ms per MB over
    check_memory(fits, "the strategy")
    with pytest.raises(StrategyError, match=r"device 0 needs 6\.0 MB, has 4\.0 MB"):
        check_memory(over, "the imported strategy")
