"""bench/vs_ddp.py compares like with like and cleans up after itself: the torch twins of its
networks have our parameter counts and output shapes, its DistributedDataParallel child trains
with two gloo processes and reports a figure, and a child's leftover processes are ended."""

import argparse
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture
def vs_ddp(monkeypatch):
    """bench/vs_ddp.py as a module, with bench/ importable as the script has it."""
    monkeypatch.syspath_prepend(str(BENCH))
    import vs_ddp
    return vs_ddp


@pytest.mark.parametrize("name", ["cifar10_cnn", "alexnet_cifar", "resnet14_cifar"])
def test_torch_twin_matches_our_network(vs_ddp, name):
    counts = vs_ddp.twins(name, batch=4)
    (ours, our_shape), (theirs, their_shape) = counts["flexflow-dask"], counts["pytorch"]
    assert our_shape == their_shape == (4, 10)
    assert ours == theirs


def test_ddp_child_trains_with_two_processes(vs_ddp):
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    args = argparse.Namespace(steps=1, warmup=0, batch=4, devices=2, budget=0)
    assert vs_ddp.samples_per_second(args, "pytorch-ddp", "cifar10_cnn") > 0


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_childs_leftover_processes_are_ended(vs_ddp):
    from child_processes import run_child
    leaves_one_behind = ("import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', "
                         "'import time; time.sleep(60)']).pid)")
    pid = int(run_child([sys.executable, "-c", leaves_one_behind], dict(os.environ)))
    assert not _running(pid)


def test_resnet14_cifar_has_13_batch_norms_in_both_frameworks(vs_ddp):
    """The stem's and two per block, none on the shortcuts, in both frameworks."""
    import dnn
    import torch_twins

    from flexflow.core import FFConfig, FFModel
    ff = FFModel(FFConfig(argv=[], batch_size=2))
    dnn.resnet14_cifar(ff, 2)
    ours = sum(layer.type_name == "BatchNorm" for layer in ff.graph.layers)
    theirs = sum(isinstance(m, torch.nn.BatchNorm2d)
                 for m in torch_twins.module("resnet14_cifar").modules())
    assert ours == theirs == 13


def _sync_bn_rank(rank: int, port: int, results) -> None:
    """Rank `rank` of 2: its half of a batch through the synchronized batch norm, against
    nn.BatchNorm2d over the whole batch in this process."""
    import torch_sync_bn

    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(8, 3, 5, 5, generator=generator) * 3 + 1
        upstream = torch.randn(8, 3, 5, 5, generator=generator)
        whole = torch.nn.BatchNorm2d(3)
        with torch.no_grad():
            whole.weight.copy_(torch.tensor([0.5, 2.0, -1.0]))
            whole.bias.copy_(torch.tensor([0.1, 0.0, 0.3]))
        mine = torch_sync_bn.synchronized(torch.nn.Sequential(torch.nn.BatchNorm2d(3)))
        mine.load_state_dict({f"0.{k}": v for k, v in whole.state_dict().items()})
        x_whole = x.clone().requires_grad_()
        y_whole = whole(x_whole)
        (y_whole * upstream).sum().backward()
        half = slice(4 * rank, 4 * rank + 4)
        x_half = x[half].clone().requires_grad_()
        y_half = mine(x_half)
        (y_half * upstream[half]).sum().backward()
        grads = torch.cat([mine[0].weight.grad, mine[0].bias.grad])
        dist.all_reduce(grads)  # DDP sums (then averages) the replicas' weight gradients
        results.put((rank, float((y_half - y_whole[half]).abs().max()),
                     float((x_half.grad - x_whole.grad[half]).abs().max()),
                     float((grads - torch.cat([whole.weight.grad, whole.bias.grad])).abs().max()),
                     float((mine[0].running_var - whole.running_var).abs().max())))
        dist.barrier()  # no rank tears its gloo pairs down while another still uses them
    finally:
        dist.destroy_process_group()


def test_the_ddp_baselines_synchronized_batch_norm_is_batch_norm_over_the_whole_batch(vs_ddp):
    """Two gloo ranks with half a batch each give nn.BatchNorm2d's output, input gradient,
    summed weight gradients and running variance over the whole batch."""
    import torch.distributed as dist
    import torch.multiprocessing as mp
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    import torch_ddp
    results = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_sync_bn_rank, args=(torch_ddp.free_port(), results), nprocs=2, join=True)
    for _ in range(2):
        rank, *errors = results.get()
        assert max(errors) < 1e-5, (rank, errors)
