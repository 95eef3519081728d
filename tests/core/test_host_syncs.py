"""A training step makes the host wait for its device at most once (issue: the GPU path): the
non-finite guard's verdicts are made on the device and taken by the fused optimizers, Adam's step
count is made on the device, and the loss's sums and the verdicts are read in one transfer at the
iteration's end (scheduler/device_values.py). On CPUs the vendor kernels run on the same torch
calls, so counting the calls that wait on a GPU (a tensor read to the host, or made from host
data on a device) counts the step's synchronisations."""

import numpy as np
import pytest
import torch

from flexflow.core import AdamOptimizer, FFConfig, FFModel, LossType, SGDOptimizer

BATCH = 8
# (not `.numpy()`: the CPU side of the vendor bridge, a DLPack hand-over to CuPy on a GPU)
READS = ("item", "tolist", "__bool__", "__float__", "__int__")


@pytest.fixture
def host_waits(monkeypatch):
    """The calls that would make the host wait for a GPU, counted while they are patched."""
    calls = []

    def counting(name, original):
        def call(*args, **kwargs):
            calls.append(name)
            return original(*args, **kwargs)
        return call
    for name in READS:
        monkeypatch.setattr(torch.Tensor, name, counting(name, getattr(torch.Tensor, name)))
    upload = torch.tensor

    def tensor(data, *args, device=None, **kwargs):
        if device is not None:
            calls.append("upload")
        return upload(data, *args, device=device, **kwargs)
    monkeypatch.setattr(torch, "tensor", tensor)
    return calls


@pytest.mark.parametrize("optimizer", [SGDOptimizer, AdamOptimizer])
def test_a_guarded_step_reads_its_device_once(host_waits, optimizer):
    ff = FFModel(FFConfig(argv=[], batch_size=BATCH))
    x = ff.create_tensor([BATCH, 16])
    ff.softmax(ff.dense(ff.relu(ff.dense(x, 32)), 4))
    ff.compile(optimizer=optimizer(ff, 0.01),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    rng = np.random.default_rng(0)
    x.set_tensor(ff, rng.standard_normal((BATCH, 16)).astype(np.float32))
    ff.label_tensor.set_tensor(ff, (np.arange(BATCH) % 4).astype(np.int32).reshape(-1, 1))
    ff.train_step()  # (the first step creates the optimizer's state)
    host_waits.clear()
    steps = 3
    for _ in range(steps):
        ff.train_step()
    assert len(host_waits) <= steps, host_waits


def test_an_iteration_s_device_values_come_to_the_host_in_one_read(host_waits):
    from flexflow.scheduler.device_values import NONFINITE_GRADIENT, Verdict, on_host
    records = [{"samples": 8, "loss": torch.tensor(1.5), "correct": torch.tensor(3)},
               Verdict("kept", torch.tensor(0.0)), Verdict("skipped", torch.tensor(1.0))]
    host_waits.clear()
    assert on_host(records, np) == [{"samples": 8, "loss": 1.5, "correct": 3}, None,
                                    {NONFINITE_GRADIENT: "skipped"}]
    assert host_waits == ["tolist"]
    assert isinstance(on_host(records, np)[0]["correct"], int)
