"""The vendor kernels' bridge to CuPy arrays (ops/vendor.py), with stand-ins for CuPy and a
CUDA torch: it needs a torch built with CUDA, and it turns TF32 off unless asked for."""

import types

import pytest

from flexflow.ops import vendor


def fake_torch(cuda: bool):
    """A torch as the bridge sees it: whether CUDA is there, its TF32 switches (on, as cuDNN's
    is by default), DLPack."""
    backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(
        allow_tf32=True)), cudnn=types.SimpleNamespace(allow_tf32=True))
    return types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: cuda),
                                 backends=backends, from_dlpack=lambda array: array,
                                 ops=types.SimpleNamespace(aten=None))


class FakeCupy(types.ModuleType):
    """CuPy as the bridge sees it, with its allocator already shared (nothing to set up)."""

    def __init__(self):
        super().__init__("cupy")
        pool = types.SimpleNamespace(malloc=object())
        self.get_default_memory_pool = lambda: pool
        self.cuda = types.SimpleNamespace(get_allocator=lambda: None)
        self.from_dlpack = lambda tensor: tensor


@pytest.fixture
def bridge_to(monkeypatch):
    """The bridge `vendor` makes for CuPy arrays, with `torch` as the installed torch."""
    def make(torch):
        monkeypatch.setattr(vendor, "_torch", lambda: torch)
        monkeypatch.setattr(vendor, "_tensor_op_math", {"allowed": False})
        return vendor._make_bridge(FakeCupy())
    return make


def test_cupy_arrays_with_a_cpu_only_torch_get_the_reference_kernels(bridge_to):
    assert bridge_to(fake_torch(cuda=False)) is None
    assert bridge_to(fake_torch(cuda=True)) is not None


def test_tf32_is_off_unless_asked_for(bridge_to, monkeypatch):
    torch = fake_torch(cuda=True)
    bridge_to(torch)
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    vendor.use_tensor_op_math(True)
    assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    vendor.use_tensor_op_math(False)
    assert not torch.backends.cudnn.allow_tf32


@pytest.mark.parametrize("flag", [False, True])
def test_the_flag_reaches_every_device_s_process(monkeypatch, flag):
    """compile runs `use_tensor_op_math` with `--allow-tensor-op-math-conversion` on each
    device (here: this process's two)."""
    from flexflow.core import FFConfig, FFModel, LossType, SGDOptimizer
    calls = []
    monkeypatch.setattr(vendor, "use_tensor_op_math", calls.append)
    argv = ["-ll:gpu", "2", "--in-process"] + ["--allow-tensor-op-math-conversion"] * flag
    ff = FFModel(FFConfig(argv=argv, batch_size=4))
    ff.softmax(ff.dense(ff.create_tensor([4, 3]), 2))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.1),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    assert calls == [flag, flag]
