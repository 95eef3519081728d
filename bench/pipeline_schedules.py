"""GPipe's schedule against 1F1B's in real runs: per-step wall time and each worker's measured
peak memory of a deep MLP trained on a local cluster of 2 single-threaded Dask workers (one a
device) as a 2-stage pipeline (scheduler/pipelines.py, balanced by flops) in M micro-batches,
in each schedule, beside one device in this process (the losses' reference) and PyTorch's own
pipelining in the same two schedules on 2 gloo processes (bench/torch_pipeline.py: the same
stages, `ScheduleGPipe` and `Schedule1F1B`), run after each of our rounds.

In GPipe's schedule each stage runs every micro-batch's forward, then every backward, and holds
all M micro-batches' activations; in 1F1B's the first stage runs 2 forwards, then a backward
and a forward in turn, and the last stage 1 (`ParallelConfig.in_flight`), so each holds at most
2 and 1 micro-batches' activations. The model (bench/pipeline_overlap.py's, at sizes where the
activations outweigh the weights: batch 8,192 against width 256) trains with
`--profiling`, so that every kernel task reads its worker's allocated bytes after it runs
(scheduler/memory_use.py: the C heap of the worker's process); the largest over the measured
steps is the worker's peak (`get_perf_metrics().peak_memory`), printed beside the memory
model's prediction for it. The systems alternate as in bench/pipeline_overlap.py (rounds, the
order rotated each round, medians, the host's load and steal per round), and every system's
losses must be the one device's within 1e-5 relative.

    OMP_NUM_THREADS=1 python bench/pipeline_schedules.py [--rounds 3] [--steps 3] [--warmup 1]
        [--batch 8192] [--features 256] [--width 256] [--layers 8] [--classes 4]
        [--micro 4 8]
"""

from __future__ import annotations

import statistics
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from command_line import command_line  # noqa: E402
from local_cluster import local_cluster  # noqa: E402
from pipeline_overlap import (LOSS_TOLERANCE, REFERENCE, Size, Trained, batches,  # noqa: E402
                              compiled, host_now, timed_rounds, worst_loss_gap)

import torch_pipeline  # noqa: E402

from flexflow.scheduler import cluster as cluster_module  # noqa: E402
from flexflow.scheduler.pipelines import SCHEDULES, pipeline_strategy  # noqa: E402

MIB = 1 << 20


def systems(size: Size, address: str, micro: list[int]) -> dict[str, Trained]:
    """One device in this process; on the 2 workers at `address` the 2-stage pipeline in each
    of `micro` micro-batches, in each schedule, profiled."""
    cluster = ["--scheduler", address, "-ll:gpu", "2", "--recovery-interval", "0",
               "--profiling"]
    found = {REFERENCE: compiled(size, [], None)}
    for m in micro:
        for schedule in SCHEDULES:
            found[f"{schedule} x{m}"] = compiled(
                size, cluster, partial(pipeline_strategy, num_devices=2, stages=2, micro=m,
                                       schedule=schedule))
    return found


def measure(size: Size, rounds: int, steps: int, warmup: int, micro: list[int],
            torch: bool = True) -> tuple[dict[str, Trained], dict[str, tuple[list, list]]]:
    """Every system trained and timed on a fresh 2-worker cluster, and each cluster system's
    (measured peaks, predicted peaks) per worker, in bytes; where `torch`, each round followed
    by PyTorch's pipeline in each schedule and count of micro-batches (`torch_rounds`), whose
    step seconds join the systems (as "PyTorch GPipe x8"...) and whose memory is each rank's
    peak resident growth, in bytes."""
    data, found, memory = batches(size), {}, {}
    with local_cluster(2) as cluster:
        address = cluster.scheduler_address
        try:
            ours = systems(size, address, micro)
            try:
                names = list(ours)
                for r in range(rounds):  # the order rotated each round
                    order = names[r % len(names):] + names[:r % len(names)]
                    timed_rounds({name: ours[name] for name in order}, data, 1, steps,
                                 warmup if r == 0 else 0, lambda line: print(line, flush=True))
                    if torch:
                        torch_rounds(size, data, micro, steps, found, memory)
                memory.update({name: (s.ff.get_perf_metrics().peak_memory,
                                      s.ff.compiled.profiler.predicted_memory)
                               for name, s in ours.items() if name != REFERENCE})
                found = {**ours, **found}
            finally:
                for system in ours.values():
                    system.ff.compiled.executor.close()
        finally:
            cluster_module.disconnect(address)
    return found, memory


def torch_rounds(size: Size, data: list, micro: list[int], steps: int, found: dict,
                 memory: dict) -> None:
    """One round of PyTorch's pipeline (bench/torch_pipeline.py) in each count of `micro`
    and each schedule, `steps` steps after one warm-up step, its step seconds added to
    `found` and its ranks' peak growth (the largest over rounds) to `memory`."""
    for m in micro:
        for schedule in SCHEDULES:
            name = f"PyTorch {schedule} x{m}"
            seconds, peaks = torch_pipeline.run(size, schedule, m, data, 1, steps)
            found.setdefault(name, Trained(None, None, [], [])).seconds.extend(seconds)
            before = memory.get(name, ([0, 0], None))[0]
            memory[name] = ([max(a, b) for a, b in zip(before, peaks)], None)
            print(f"  {name}: ms per step {1e3 * statistics.median(seconds):.0f}", flush=True)


def summary(found: dict[str, Trained], memory: dict[str, tuple[list, list]]) -> list[str]:
    """Per system its median ms per step, its speed against GPipe's in as many micro-batches
    (PyTorch's against PyTorch's), ours against PyTorch's in the same schedule, each worker's
    measured and predicted peak MiB (PyTorch's: each rank's peak resident growth), and its
    worst loss gap."""
    median = {name: 1e3 * statistics.median(s.seconds) for name, s in found.items()}
    gaps = worst_loss_gap({name: s for name, s in found.items() if s.losses})
    lines = [f"{'system':<18}{'median ms':>10}{'vs GPipe':>9}{'vs PyTorch':>11}  "
             f"{'peak MiB, measured':<22}{'predicted':<14}worst loss gap"]
    for name, ms in median.items():
        against = versus = peaks = predicted = ""
        if name in memory:
            ours = not name.startswith("PyTorch")
            gpipe = ("" if ours else "PyTorch ") + "GPipe x" + name.split("x")[-1]
            against = f"{median[gpipe] / ms:.2f}x"
            if ours and "PyTorch " + name in median:
                versus = f"{median['PyTorch ' + name] / ms:.2f}x"
            peaks = " / ".join("n/a" if p is None else f"{p / MIB:.1f}" for p in memory[name][0])
            predicted = " / ".join(f"{p / MIB:.1f}" for p in memory[name][1] or ())
        gap = f"{gaps[name]:.1e}" if name in gaps else ""
        lines.append(f"{name:<18}{ms:>10.1f}{against:>9}{versus:>11}  {peaks:<22}"
                     f"{predicted:<14}{gap}")
    worst = max(gaps.values())
    verdict = "within" if worst <= LOSS_TOLERANCE else "NOT within"
    lines.append(f"losses: every system's measured losses are {verdict} {LOSS_TOLERANCE:g} "
                 f"relative of the one device's (worst {worst:.1e}; PyTorch's are not "
                 f"compared: its own initial weights)")
    return lines


def main():
    args = command_line(__doc__, rounds=3, steps=3, warmup=1, batch=8192, features=256,
                        width=256, layers=8, classes=4, micro=[4, 8])
    size = Size(args.batch, args.features, args.width, args.layers, args.classes)
    micro = [m for m in args.micro if size.batch % m == 0]
    print(f"model: {size}; SGD; 2 single-threaded Dask workers, profiled; 2-stage pipelines "
          f"in {micro} micro-batches, GPipe's and 1F1B's schedules; {args.rounds} rounds x "
          f"{args.steps} steps after {args.warmup} warm-up steps", flush=True)
    print(f"host at start: {host_now()}", flush=True)
    found, memory = measure(size, args.rounds, args.steps, args.warmup, micro)
    print("\n".join(summary(found, memory)))
    print(f"host at end: {host_now()}")


if __name__ == "__main__":
    main()
