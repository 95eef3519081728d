"""Running a torch model and its flexflow.torch translation on the same inputs."""

from __future__ import annotations

import numpy as np
import torch

from flexflow.core import CompMode, DataType, FFConfig, FFModel
from flexflow.torch.model import PyTorchModel

DATA_TYPES = {np.dtype(np.float32): DataType.DT_FLOAT, np.dtype(np.int64): DataType.DT_INT64,
              np.dtype(np.int32): DataType.DT_INT32, np.dtype(np.bool_): DataType.DT_BOOLEAN}


def torch_outputs(model, inputs) -> list[np.ndarray]:
    with torch.no_grad():
        out = model(*(torch.from_numpy(x) for x in inputs))
    return [t.numpy() for t in (out if isinstance(out, (tuple, list)) else (out,))]


def ff_model(inputs, argv=()):
    """An FFModel whose batch size is the inputs' dim 0, and its input tensors."""
    ff = FFModel(FFConfig(argv=list(argv), batch_size=inputs[0].shape[0]))
    tensors = [ff.create_tensor(list(x.shape), DATA_TYPES[x.dtype]) for x in inputs]
    return ff, tensors


def build(model, ff, tensors, route: str, tmp_path=None) -> list:
    """Translate `model` into `ff`: in-process, or through a `.ff` file (and its `.npz`)."""
    if route == "in-process":
        return PyTorchModel(model).torch_to_ff(ff, tensors)
    filename = tmp_path / "model.ff"
    PyTorchModel(model).torch_to_file(filename)
    return PyTorchModel.file_to_ff(filename, ff, tensors)


def ff_outputs(model, inputs, route="in-process", tmp_path=None) -> list[np.ndarray]:
    """The FlexFlow translation's outputs on `inputs`, in inference mode."""
    ff, tensors = ff_model(inputs)
    return inference(ff, tensors, build(model, ff, tensors, route, tmp_path), inputs)


def inference(ff, tensors, outputs, inputs) -> list[np.ndarray]:
    """The values of `outputs` after `ff`, compiled for inference, runs on `inputs` (fed to its
    input `tensors`)."""
    ff.compile(comp_mode=CompMode.INFERENCE)
    for tensor, x in zip(tensors, inputs):
        tensor.set_tensor(ff, x)
    ff.forward()
    return [t.get_tensor(ff) for t in outputs]


def assert_outputs_match(ours, theirs, tol=1e-5) -> None:
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == b.shape, f"output {k}: shape {a.shape} vs torch's {b.shape}"
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=f"output {k}")
