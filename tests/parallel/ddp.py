"""PyTorch DistributedDataParallel as the oracle of per-partition batch norm: a small CNN
(conv-BN-ReLU-pool-dense-softmax) built in both frameworks, and its torch twin trained by DDP in
spawned gloo processes over loopback, each rank on its share of every global batch, with plain
`nn.BatchNorm2d` (each rank normalises with its own samples' statistics) and DDP's default
`broadcast_buffers=True` (rank 0's running statistics are what every replica uses)."""

from __future__ import annotations

import os
import socket

import numpy as np

from flexflow.core import DataType

from .models import BATCH, CLASSES, classify, conv_batch_norm

CHANNELS, SIZE = 4, 8
LR, MOMENTUM = 0.05, 0.9


def conv_bn_net(ff):
    """Ours: conv 3x3 (same size), batch norm with its ReLU, 2x2 max pool, dense, softmax."""
    x = ff.create_tensor([BATCH, 3, SIZE, SIZE], DataType.DT_FLOAT)
    t = ff.pool2d(conv_batch_norm(ff, x, CHANNELS), 2, 2, 2, 2, 0, 0)
    return classify(ff, ff.flat(t), [x])


def twin(weights: list[np.ndarray]):
    """The torch twin of `conv_bn_net`, holding `weights` (ours, layer by layer: conv kernel and
    bias, batch norm scale, bias and running statistics, dense kernel and bias, which is the
    order of its state_dict without the batch norm's step counter)."""
    import torch
    from torch import nn
    net = nn.Sequential(nn.Conv2d(3, CHANNELS, 3, padding=1), nn.BatchNorm2d(CHANNELS),
                        nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(CHANNELS * (SIZE // 2) ** 2, CLASSES))
    with torch.no_grad():
        for value, array in zip(_values(net), weights, strict=True):
            value.copy_(torch.from_numpy(array))
    return net


def _values(net) -> list:
    """The twin's parameters and running statistics, in our layers' weight order."""
    return [v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")]


def _rank(rank: int, world: int, initial, data, evaluated, results) -> None:
    """One DDP rank: SGD with momentum on rows [rank * share, (rank + 1) * share) of each
    batch; rank 0 then puts (each step's global loss, its weights and running statistics, the
    softmax of its twin in eval mode on `evaluated`) into `results`."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        net = torch.nn.parallel.DistributedDataParallel(twin(initial))
        optimizer = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
        rows = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
        losses = []
        for (x,), y in data:
            loss = F.cross_entropy(net(torch.from_numpy(x[rows])),
                                   torch.from_numpy(y[rows, 0]).long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        mean_loss = torch.tensor(losses) / world  # each rank's loss is its share's mean
        dist.all_reduce(mean_loss)
        if rank == 0:
            module = net.module.eval()
            with torch.no_grad():
                probabilities = torch.softmax(module(torch.from_numpy(evaluated)), dim=1)
            results.put((mean_loss.numpy(), [v.numpy().copy() for v in _values(module)],
                         probabilities.numpy()))
        del net, optimizer  # DDP's reducer holds the group: gone before the group is
        dist.barrier()  # no rank tears its gloo pairs down while another still uses them
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ddp_run(initial: list[np.ndarray], data, evaluated: np.ndarray, world: int = 2):
    """DDP's (losses per step, final weights, eval-mode probabilities on `evaluated`) for the
    twin holding `initial`, trained on `data` ([([x], labels)] per step) by `world` ranks."""
    import torch.multiprocessing as mp
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
                      GLOO_SOCKET_IFNAME="lo")
    results = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_rank, args=(world, initial, data, evaluated, results), nprocs=world, join=True)
    return results.get()
