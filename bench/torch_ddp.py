"""PyTorch DistributedDataParallel on this host: `devices` processes of one thread each, joined
by the gloo backend over loopback, each training its share (batch / devices samples) of one
global batch of a torch twin (bench/torch_twins.py), its batch norms per replica as DDP's, or
with `sync_bn` over the global batch (bench/torch_sync_bn.py).

The ranks are spawned processes: if one fails, torch.multiprocessing ends the others and
raises here; the process group is destroyed on every way out of a rank."""

from __future__ import annotations

import os
import socket

import torch_twins


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _rank(rank: int, devices: int, name: str, batch: int, warmup: int, steps: int, sync_bn: bool,
          results):
    """One rank's run; rank 0 puts the global samples/s into `results`."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=devices)
    try:
        net = torch_twins.module(name)
        if sync_bn:
            import torch_sync_bn
            net = torch_sync_bn.synchronized(net)
        net = torch.nn.parallel.DistributedDataParallel(net)
        share = batch // devices
        images, labels = torch_twins.cifar_batch(batch)
        step = torch_twins.sgd_step(net, images[rank * share:(rank + 1) * share],
                                    labels[rank * share:(rank + 1) * share])
        for _ in range(warmup):
            step()
        elapsed = torch_twins.seconds(step, steps, dist.barrier)
        if rank == 0:
            results.put(steps * batch / elapsed)
        del net, step  # DDP's reducer holds the group: gone before the group is
        dist.barrier()  # no rank tears its gloo pairs down while another still uses them
    finally:
        dist.destroy_process_group()


def samples_per_second(name: str, batch: int, devices: int, warmup: int, steps: int,
                       sync_bn: bool = False) -> float:
    """Global samples/s of `steps` DDP steps of network `name`, after `warmup` steps; the
    time is from a barrier before the first step to a barrier after the last."""
    import torch.distributed as dist
    import torch.multiprocessing as mp
    if not dist.is_available() or not dist.is_gloo_available():
        raise RuntimeError("this torch has no gloo backend for DistributedDataParallel")
    if batch % devices:
        raise ValueError(f"batch {batch} does not split evenly over {devices} processes")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                      GLOO_SOCKET_IFNAME="lo")
    results = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_rank, args=(devices, name, batch, warmup, steps, sync_bn, results),
             nprocs=devices, join=True)
    return results.get()
