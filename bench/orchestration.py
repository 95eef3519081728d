"""What an iteration costs beyond its kernels on a 2-worker local cluster, and whether memory stays
flat over many iterations.

A tiny MLP (batch 8, 12 -> 16 -> 4: kernels of microseconds) is trained five ways, in
alternating rounds: in this process (the kernels and the executor's own work, the baseline),
iteration by iteration on the cluster (`train_step`: one Dask graph per iteration), with `fit`
on data loaders (windows of iterations: one graph per window), and in a hand-written loop
(forward, zero_gradients, backward, update: a graph each), without and inside
`begin_trace`/`end_trace` (one graph an iteration). The overhead of each is its
median ms per iteration minus the in-process one. Then a long `fit` (20k iterations by default)
on the cluster `-ll:gpu 2` starts by itself (TLS, Dask's histories bounded) samples the resident
memory of the client, of the scheduler and of each worker every 1000 iterations and prints the
growth per 1000 iterations over the second half (after the allocators have settled).

    python bench/orchestration.py [--rounds 5] [--steps 200] [--long 20000]
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from command_line import command_line  # noqa: E402
from host_load import StealMeter, describe  # noqa: E402
from local_cluster import local_cluster  # noqa: E402

from flexflow.core import (ActiMode, DataType, FFConfig, FFModel, LossType,  # noqa: E402
                           SGDOptimizer)
from flexflow.scheduler import cluster as cluster_module  # noqa: E402

BATCH = 8
FIT_FLAGS = ["--recovery-interval", "64"]  # windows of up to 64 iterations between copies


def mlp(argv: list[str]):
    ff = FFModel(FFConfig(argv=argv, batch_size=BATCH))
    x = ff.create_tensor([BATCH, 12], DataType.DT_FLOAT)
    ff.softmax(ff.dense(ff.dense(x, 16, ActiMode.AC_MODE_RELU), 4))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.01),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff, x


def data(samples: int):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((samples, 12)).astype(np.float32),
            rng.integers(0, 4, (samples, 1)).astype(np.int32))


def step_loop_ms(ff, x, steps: int) -> float:
    """ms per iteration of `steps` train_step calls on fed batches."""
    xs, ys = data(BATCH)
    x.set_tensor(ff, xs)
    ff.label_tensor.set_tensor(ff, ys)
    ff.train_step()
    start = time.perf_counter()
    for _ in range(steps):
        ff.train_step()
    return (time.perf_counter() - start) * 1e3 / steps


def hand_written_ms(ff, x, steps: int, traced: bool) -> float:
    """ms per iteration of a FlexFlow-style loop of the four calls on fed batches."""
    xs, ys = data(BATCH)
    x.set_tensor(ff, xs)
    ff.label_tensor.set_tensor(ff, ys)
    config = ff.ffconfig
    with quiet():  # backward prints each iteration's [Metrics] line
        start = time.perf_counter()
        for _ in range(steps):
            if traced:
                config.begin_trace(111)
            ff.forward()
            ff.zero_gradients()
            ff.backward()
            ff.update()
            if traced:
                config.end_trace(111)
    return (time.perf_counter() - start) * 1e3 / steps


def fit_ms(ff, x, steps: int) -> float:
    """ms per iteration of a one-epoch fit of `steps` iterations on data loaders."""
    xs, ys = data(BATCH * steps)
    loaders = (ff.create_data_loader(x, xs), ff.create_data_loader(ff.label_tensor, ys))
    start = time.perf_counter()
    with quiet():
        ff.fit(x=loaders[0], y=loaders[1], epochs=1)
    return (time.perf_counter() - start) * 1e3 / steps


def quiet():
    """The `[Metrics]` lines a fit prints to stderr go to nothing while it is timed."""
    return contextlib.redirect_stderr(io.StringIO())


def rss_mb(client) -> dict[str, float]:
    """Resident memory (MB) of this process, of the scheduler and of each worker."""
    def rss():
        import psutil
        return psutil.Process().memory_info().rss / 2**20
    return {"client": rss(), "scheduler": client.run_on_scheduler(rss), **client.run(rss)}


def memory_growth(iterations: int) -> dict[str, float]:
    """MB per 1000 iterations of each process over the second half of a long fit on the
    cluster `-ll:gpu 2` starts."""
    ff, x = mlp(["-ll:gpu", "2", *FIT_FLAGS])
    client = ff.compiled.cluster.client
    samples, chunk = [], 1000
    xs, ys = data(BATCH * chunk)
    loaders = (ff.create_data_loader(x, xs), ff.create_data_loader(ff.label_tensor, ys))
    for _ in range(iterations // chunk):
        with quiet():
            ff.fit(x=loaders[0], y=loaders[1], epochs=1)
        samples.append(rss_mb(client))
    half = samples[len(samples) // 2:]
    return {name: (half[-1][name] - half[0][name]) / max(len(half) - 1, 1)
            for name in samples[0]}


def main():
    args = command_line(__doc__, rounds=5, steps=200, long=20000)
    steal = StealMeter()
    print(f"{os.cpu_count()} cores; tiny MLP, batch {BATCH}; {args.rounds} rounds of "
          f"{args.steps} iterations; {describe(steal.read())} at start")
    with local_cluster(2) as cluster:
        address = cluster.scheduler_address
        local = mlp(["--in-process"])
        steps_run = mlp(["--scheduler", address, "-ll:gpu", "2"])
        fitted = mlp(["--scheduler", address, "-ll:gpu", "2", *FIT_FLAGS])
        looped = mlp(["--scheduler", address, "-ll:gpu", "2"])
        runs = [("in-process", lambda: step_loop_ms(*local, args.steps)),
                ("train_step", lambda: step_loop_ms(*steps_run, args.steps)),
                ("fit", lambda: fit_ms(*fitted, args.steps)),
                ("4 calls", lambda: hand_written_ms(*looped, args.steps, False)),
                ("traced", lambda: hand_written_ms(*looped, args.steps, True))]
        times: dict[str, list[float]] = {name: [] for name, _ in runs}
        for r in range(args.rounds):
            for name, measure in runs[r % len(runs):] + runs[:r % len(runs)]:
                times[name].append(measure())
        base = statistics.median(times["in-process"])
        for name, values in times.items():
            ms = statistics.median(values)
            extra = "" if name == "in-process" else f"  overhead {ms - base:6.2f} ms/iteration"
            print(f"{name:>10}: {ms:6.2f} ms/iteration (median of {len(values)}){extra}")
        print(f"after timing: {describe(steal.read())}")
        if args.long:
            growth = memory_growth(args.long)
            print(f"memory over {args.long} iterations of fit, MB per 1000 iterations (second "
                  f"half): " + ", ".join(f"{k} {v:+.2f}" for k, v in growth.items()))
        cluster_module.disconnect(address)
    print(f"at end: {describe(steal.read())}")


if __name__ == "__main__":
    main()
