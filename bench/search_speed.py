"""Search speed: MCMC with delta simulation vs full simulation (task graph rebuilt and re-fused
for every proposal), on AlexNet (or `--model`, any network of bench/dnn.py; batch 64 per device)
over the 16-device P100 preset. `--run-checks` simulates the task graphs a default run executes,
as bench/paper_table.py does (buckets all-reduced, gradients checked): the deep networks' search
is timed so (issue 34: Inception-v3 and ResNet-101 at budget 1,000).

The delta search runs in each of `--processes` counts (proposals scored several at once in
forked processes, scheduler/speculation.py), alternating. All searches draw the same proposals
(same seed) and, since the delta simulation returns the full simulation's numbers exactly and
the processes keep the one-process chain, must end with the same best cost. Times are medians
over runs, wall clock and CPU time of this process (the forked ones' is not counted; the
machine may be shared: both are printed, with the load average).

    python bench/search_speed.py [--budget 1000] [--runs 3] [--full-runs 1] [--flags default,all]
                                 [--model resnet101 --run-checks --full-runs 0]
                                 [--machine p100-4x4] [--processes 1,2]
"""

from __future__ import annotations

import io
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import dnn  # noqa: E402
from command_line import command_line  # noqa: E402
from paper_table import RUN_CHECKS  # noqa: E402

from flexflow.scheduler import machine as machine_module  # noqa: E402
from flexflow.scheduler.search import SearchOptions, search  # noqa: E402
from flexflow.scheduler.simulator import Simulator  # noqa: E402
from flexflow.scheduler.taskgraph import Checks  # noqa: E402

FLAGS = {"default": {}, "all": {"enable_parameter_parallel": True,
                                "enable_attribute_parallel": True}}


def timed_search(graph, objective, machine, options, checks):
    """(wall s, CPU s of this process, best cost, groups simulated per proposal in this
    process, proposals simulated in this process): the groups tell a slower search from one
    that visits strategies of more fused groups."""
    simulator = Simulator(graph, objective, machine, checks=checks)  # fresh: no warm caches
    groups = []
    simulate = simulator.simulate if options.delta else simulator.simulate_full

    def counted(strategy):
        simulation = simulate(strategy)
        groups.append(len(simulation.plans))
        return simulation
    simulator.simulate = simulator.simulate_full = counted
    wall, cpu = time.perf_counter(), time.process_time()
    result = search(simulator, options, stream=io.StringIO())
    return (time.perf_counter() - wall, time.process_time() - cpu, result.best_cost,
            statistics.fmean(groups), len(groups))


def main():
    args = command_line(__doc__, budget=1000, runs=3, full_runs=1, flags="default,all",
                        machine="p100-4x4", model="alexnet", run_checks=False, processes="1,2")
    machine = machine_module.preset(args.machine)
    n = machine.num_devices
    graph, objective = dnn.graph_of(getattr(dnn, args.model), 64 * n)
    checks = RUN_CHECKS if args.run_checks else Checks()
    counts = [int(p) for p in str(args.processes).split(",")]
    print(f"{args.model}, batch {64 * n}, {machine.describe()}; budget {args.budget}"
          f"{', checks of a run' if args.run_checks else ''}; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    for name in args.flags.split(","):
        delta = {p: [] for p in counts}
        for _ in range(args.runs):  # the process counts alternate
            for p in counts:
                options = SearchOptions(args.budget, processes=p, **FLAGS[name])
                delta[p].append(timed_search(graph, objective, machine, options, checks))
        full_options = SearchOptions(args.budget, delta=False, **FLAGS[name])
        full = [timed_search(graph, objective, machine, full_options, checks)
                for _ in range(args.full_runs)]
        report(name, args.budget, delta, full)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def report(name, budget, delta, full):
    """The medians: each process count's delta search, the full one, and how they compare."""
    costs = {round(r[2], 9) for runs in delta.values() for r in runs + full}
    one = min(delta)
    for p, runs in delta.items():
        wall, cpu = (statistics.median(r[i] for r in runs) for i in (0, 1))
        print(f"flags {name:7s}: delta in {p} process{'es' if p > 1 else ''} {wall:6.2f} s wall "
              f"({cpu:6.2f} s CPU here), median of {len(runs)}"
              + (f"; {statistics.median(r[0] for r in delta[one]) / wall:4.2f}x "
                 f"{one} process" if p != one else ""))
    dw, dc = (statistics.median(r[i] for r in delta[one]) for i in (0, 1))
    compared = ""
    if full:  # (--full-runs 0 skips it: the deep networks' full search takes an hour)
        fw, fc = (statistics.median(r[i] for r in full) for i in (0, 1))
        print(f"               full {fw:7.2f} s wall ({fc:7.2f} s CPU), median of {len(full)}")
        compared = f"speed-up {fw / dw:5.1f}x wall, {fc / dc:5.1f}x CPU; "
    print(f"               {compared}best cost "
          f"{'identical' if len(costs) == 1 else 'DIFFERENT'}: "
          f"{', '.join(f'{c:.4f}' for c in sorted(costs))} ms; "
          f"{budget / dw:.0f} proposals/s (delta, {one} process)")
    groups = statistics.median(r[3] for r in delta[one])
    simulated = statistics.median(r[4] for r in delta[one])
    print(f"               {simulated:.0f} of {budget + 1} proposals simulated (the others "
          f"change nothing); {groups:.1f} fused groups a proposal; delta "
          f"{dc / simulated / groups * 1e6:.1f} us CPU a group")


if __name__ == "__main__":
    main()
