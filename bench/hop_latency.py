"""What a dependent hop costs on a local cluster of two single-threaded workers: between Dask
tasks, and between the executor's fused groups, which devices push to each other.

Dask tasks: a chain of tiny tasks alternates between the two workers, each passing the next an
array of `--bytes`; a second chain stays on one worker. From the workers' and the scheduler's
transition logs (their own clocks, one host) each cross-worker hop splits into: the producer's
"task finished" reaching the scheduler, the scheduler's "compute this" reaching the consumer,
the consumer fetching the array from the producer, and the consumer starting the task. That is
why the executor does not make each fused group a Dask task: a strategy with many dependent
levels (split dense layers all-gather their activations at every layer) would pay this at every
level.

The executor: a chain of fused groups through `DaskExecutor`, each sending the next `--bytes`,
alternating between the two devices (a hop is one pushed message, `scheduler/push.py`); per
hop, the slope of the iteration time over the chain's length.

    python bench/hop_latency.py [--bytes 500000] [--chains 15] [--length 6]
"""

from __future__ import annotations

import statistics
import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from local_cluster import local_cluster  # noqa: E402
from command_line import command_line  # noqa: E402

from distributed import Client  # noqa: E402

from flexflow.scheduler.actions import Context  # noqa: E402
from flexflow.scheduler.calibration.probes import Probe, interleaved_ms  # noqa: E402
from flexflow.scheduler.distributed import DaskExecutor  # noqa: E402
from flexflow.scheduler.taskgraph import Task, TaskGraph  # noqa: E402

STAGES = ("finished -> scheduler", "scheduler -> consumer", "fetch", "start")


def produce(previous, nbytes: int):
    return np.ones(nbytes, dtype=np.uint8)


def _transitions(log, prefix: str) -> dict[tuple[str, str, str], float]:
    """{(key, from, to): time} of the first transitions in a Dask transition `log` of keys
    starting with `prefix`."""
    when: dict[tuple[str, str, str], float] = {}
    for entry in log:
        if isinstance(entry[0], str) and entry[0].startswith(prefix):
            when.setdefault((entry[0], entry[1], entry[2]), entry[-1])
    return when


def _worker_log(prefix: str, dask_worker=None) -> dict:
    return _transitions(dask_worker.state.log, prefix)


def _scheduler_log(prefix: str, dask_scheduler=None) -> dict:
    return _transitions(dask_scheduler.transition_log, prefix)


def run_chain(client: Client, workers: list[str], name: str, length: int, nbytes: int) -> None:
    future = None
    for i in range(length):
        future = client.submit(produce, future, nbytes, key=f"{name}-{i}", pure=False,
                               workers=[workers[i % len(workers)]], allow_other_workers=False)
    future.result()


def hop_stages(client: Client, prefix: str, chains: list[str],
               length: int) -> list[dict[str, float]]:
    """The stages (ms) of every hop of `chains` (names starting with `prefix`)."""
    on_workers: dict[tuple[str, str, str], float] = {}
    for when in client.run(_worker_log, prefix).values():
        for transition, t in when.items():
            on_workers.setdefault(transition, t)
    on_scheduler = client.run_on_scheduler(_scheduler_log, prefix)
    hops = []
    for chain in chains:
        for i in range(1, length):
            producer, consumer = f"{chain}-{i - 1}", f"{chain}-{i}"
            marks = [on_workers.get((producer, "executing", "memory")),
                     on_scheduler.get((producer, "processing", "memory")),
                     on_workers.get((consumer, "compute-task", "released")),
                     on_workers.get((consumer, "waiting", "ready")),
                     on_workers.get((consumer, "ready", "executing"))]
            if None not in marks:
                hops.append({stage: 1e3 * (end - start)
                             for stage, start, end in zip(STAGES, marks, marks[1:])})
    return hops


def describe(hops: list[dict[str, float]]) -> str:
    medians = {stage: statistics.median(h[stage] for h in hops) for stage in STAGES}
    total = statistics.median(sum(h.values()) for h in hops)
    parts = ", ".join(f"{stage} {ms:.1f}" for stage, ms in medians.items())
    return f"{total:5.1f} ms per hop (medians of {len(hops)}: {parts})"


def executor_chain(length: int, nbytes: int) -> TaskGraph:
    """`length` fused groups alternating between devices 0 and 1, each sending the next
    `nbytes`. (On one device such a chain would be fused into a single group.)"""
    return TaskGraph([Task(f"link{i}-forward", i % 2, "forward", Probe(nbytes, (i + 1) % 2),
                           (f"link{i - 1}-forward",) if i else ()) for i in range(length)])


def executor_hop_ms(client: Client, workers: list[str], length: int, nbytes: int,
                    runs: int) -> float:
    """Per hop of a chain of fused groups across the two devices: (median time of `length`
    groups - of one) / (length - 1), the two chains run alternately."""
    executors = {n: DaskExecutor(executor_chain(n, nbytes), Context(None), client, workers)
                 for n in (1, length)}
    try:
        ms = interleaved_ms({n: partial(e.run, "forward") for n, e in executors.items()}, runs)
    finally:
        for executor in executors.values():
            executor.close()
    return (ms[length] - ms[1]) / (length - 1)


def main():
    args = command_line(__doc__, bytes=500_000, chains=15, length=6)
    with local_cluster(2) as cluster, Client(cluster) as client:
        workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
        for label, on in (("across workers", workers), ("on one worker ", workers[:1])):
            prefix = f"hop{len(on)}-"
            run_chain(client, on, f"warm{len(on)}", args.length, args.bytes)
            chains = [f"{prefix}{c}" for c in range(args.chains)]
            for chain in chains:
                run_chain(client, on, chain, args.length, args.bytes)
            print(f"Dask tasks, {label}: "
                  f"{describe(hop_stages(client, prefix, chains, args.length))}")
        hop = executor_hop_ms(client, workers, 2 * args.length, args.bytes, args.chains)
        print(f"executor,   across workers: {hop:5.1f} ms per hop (slope over chain lengths 1 "
              f"and {2 * args.length}, medians of {args.chains} runs each)")


if __name__ == "__main__":
    main()
