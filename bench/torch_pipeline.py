"""PyTorch's own pipelining (`torch.distributed.pipelining`) on this host: 2 processes of one
thread each, joined by gloo over loopback, each one stage of bench/pipeline_overlap.py's MLP
(its dense layers cut in half by count, the classifier on the second), trained with SGD in
micro-batches under `ScheduleGPipe` or `Schedule1F1B`: the baseline bench/pipeline_schedules.py
sets beside our two schedules.

Each rank reports its step times (each step timed between barriers, so that it is the slower
rank's) and the growth of its peak resident memory over the run (Linux's VmHWM, reset once the
stage is built: what its activations, gradients and messages add to its weights)."""

from __future__ import annotations

import os

from torch_ddp import free_port

SCHEDULES = {"GPipe": "ScheduleGPipe", "1F1B": "Schedule1F1B"}


def _stage(size, rank: int):
    """Rank `rank`'s stage of the MLP: the first half of its dense layers, or the rest and
    the classifier (logits: the loss takes them)."""
    import torch
    half = size.layers // 2
    widths = [size.features] + [size.width] * size.layers
    layers = []
    for i in range(half) if rank == 0 else range(half, size.layers):
        layers += [torch.nn.Linear(widths[i], widths[i + 1]), torch.nn.ReLU()]
    if rank == 1:
        layers.append(torch.nn.Linear(size.width, size.classes))
    return torch.nn.Sequential(*layers)


def _peak_growth(start: int) -> int:
    """Bytes the peak resident memory grew since `start` (VmHWM, in bytes)."""
    return _status("VmHWM") - start


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _rank(rank: int, size, schedule: str, micro: int, batches, warmup: int, steps: int,
          results):
    """One rank's run; each rank puts (rank, step seconds, peak growth) into `results`."""
    import time

    import torch
    import torch.distributed as dist
    from torch.distributed import pipelining
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        stage = pipelining.PipelineStage(_stage(size, rank), rank, 2, torch.device("cpu"))
        loss = torch.nn.CrossEntropyLoss()
        run = getattr(pipelining, SCHEDULES[schedule])(
            stage, micro, loss_fn=lambda out, y: loss(out, y) / micro)
        optimizer = torch.optim.SGD(stage.submod.parameters(), lr=0.001)
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # resets VmHWM to the resident memory now
        start, seconds = _status("VmHWM"), []
        for i in range(warmup + steps):
            x, y = batches[i % len(batches)]
            dist.barrier()
            began = time.perf_counter()
            optimizer.zero_grad()
            if rank == 0:
                run.step(torch.from_numpy(x))
            else:
                run.step(target=torch.from_numpy(y[:, 0]).long())
            optimizer.step()
            dist.barrier()
            if i >= warmup:
                seconds.append(time.perf_counter() - began)
        results.put((rank, seconds, _peak_growth(start)))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run(size, schedule: str, micro: int, batches, warmup: int, steps: int
        ) -> tuple[list[float], list[int]]:
    """(the step seconds, each rank's peak memory growth in bytes) of `steps` steps of
    PyTorch's pipeline in `schedule` ("GPipe" or "1F1B") and `micro` micro-batches on
    `batches` (a list of (inputs, labels) arrays, step i on batch i), after `warmup` steps."""
    import torch.multiprocessing as mp
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                      GLOO_SOCKET_IFNAME="lo")
    results = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_rank, args=(size, schedule, micro, batches, warmup, steps, results),
             nprocs=2, join=True)
    found = dict((rank, (seconds, peak)) for rank, seconds, peak in
                 (results.get() for _ in range(2)))
    return found[0][0], [found[0][1], found[1][1]]
