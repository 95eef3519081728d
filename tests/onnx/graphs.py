"""Small hand-built ONNX models for the importer tests, and the two ways to run them: through
FlexFlow (the ONNX backend: first input = the model's input tensor, the others constants) and
through ONNX's reference implementation, the oracle."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from flexflow.onnx.backend import FlexFlowBackend


def value(name: str, array_or_shape, dtype=np.float32):
    shape = array_or_shape.shape if isinstance(array_or_shape, np.ndarray) else array_or_shape
    if isinstance(array_or_shape, np.ndarray):
        dtype = array_or_shape.dtype
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                         shape)


def model(nodes, inputs: dict, outputs, initializers: dict | None = None,
          opset: int | None = None) -> onnx.ModelProto:
    """`inputs`: name -> example array (or shape, float32); `outputs`: names, shapes unknown."""
    graph = helper.make_graph(
        nodes, "test", [value(name, a) for name, a in inputs.items()],
        [helper.make_empty_tensor_value_info(name) for name in outputs],
        [numpy_helper.from_array(np.asarray(a), name) for name, a in (initializers or {}).items()])
    opset = opset or onnx.defs.onnx_opset_version()
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run_flexflow(proto: onnx.ModelProto, *arrays) -> list[np.ndarray]:
    return FlexFlowBackend.prepare(proto).run(list(arrays))


def run_reference(proto: onnx.ModelProto, *arrays) -> list[np.ndarray]:
    names = [i.name for i in proto.graph.input]
    return ReferenceEvaluator(proto).run(None, dict(zip(names, arrays)))


def assert_matches_reference(proto, *arrays, rtol=1e-5, atol=1e-6):
    got, want = run_flexflow(proto, *arrays), run_reference(proto, *arrays)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
