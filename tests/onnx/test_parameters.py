"""Which float initializers of a file are parameters (parameters.py), rule by rule, the warnings
where the file does not tell, and a parameter the exporter broadcast."""

import warnings

import numpy as np
import pytest
from onnx import helper

from flexflow.onnx import ONNXImportError
from flexflow.onnx.errors import ONNXImportWarning
from flexflow.onnx.loader import read_model
from flexflow.onnx.parameters import broadcast_source, parameter_names

from .graphs import model, randn

X = {"x": (2, 4)}
MASK = np.triu(np.full((4, 4), -np.inf, np.float32), 1)


def node(op, inputs, output, **attrs):
    return helper.make_node(op, inputs, [output], **attrs)


# name -> (nodes, inputs, initializers, the parameters, the constants a warning names)
GRAPHS = {
    "weight operands": (
        [node("Gemm", ["x", "w", "b"], "g", transB=1),
         node("Transpose", ["k"], "kt"), node("MatMul", ["g", "kt"], "m"),
         node("LayerNormalization", ["m", "scale", "shift"], "y")],
        X, {"w": randn(3, 4, seed=1), "b": randn(3, seed=2), "k": randn(5, 3, seed=3),
            "scale": randn(5, seed=4), "shift": randn(5, seed=5)},
        {"w", "b", "k", "scale", "shift"}, []),
    "embedding table, not a gather at constant indices": (
        [node("Gather", ["table", "ids"], "e"), node("Gather", ["rows", "at"], "r"),
         node("Add", ["e", "r"], "y")],
        {"ids": np.zeros((2, 3), np.int64)},
        {"table": randn(10, 4, seed=6), "rows": randn(6, 4, seed=7),
         "at": np.array([0, 2, 4], np.int64)},
        {"table"}, ["rows"]),
    "bias and per-channel scale applied to a layer's output": (
        [node("MatMul", ["x", "w"], "h"), node("Add", ["h", "bias"], "hb"),
         node("Mul", ["hb", "gain"], "y1"), node("Mul", ["y1", "grid"], "y")],
        X, {"w": randn(4, 3, seed=8), "bias": randn(3, seed=9), "gain": randn(1, 3, seed=10),
            "grid": randn(2, 3, seed=11)},
        {"w", "bias", "gain"}, ["grid"]),
    "named as a module's parameter": (
        [node("Mul", ["x", "norm.weight"], "y1"), node("Mul", ["y1", "scale_table"], "y")],
        X, {"norm.weight": randn(4, seed=12), "scale_table": randn(4, seed=13)},
        {"norm.weight"}, ["scale_table"]),
    "masks, scalars, integers and running statistics": (
        [node("Reshape", ["x", "shape"], "x4"), node("Add", ["x4", "mask"], "a"),
         node("Mul", ["a", "half"], "h"), node("Reshape", ["h", "nchw"], "h4"),
         node("BatchNormalization", ["h4", "gamma", "beta", "mean", "var"], "y")],
        X, {"shape": np.array([2, 4], np.int64), "mask": MASK[:2], "half": np.float32(0.5),
            "nchw": np.array([2, 4, 1, 1], np.int64), "gamma": randn(4, seed=14),
            "beta": randn(4, seed=15), "mean": randn(4, seed=16),
            "var": np.abs(randn(4, seed=17))},
        {"gamma", "beta"}, []),
}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_the_graph_tells_parameters_from_constants(name):
    """Each rule, and the one warning for float tensors only element-wise operators read (a
    constant a parameter could be); masks, scalars and running statistics go unwarned."""
    nodes, inputs, initializers, expected, undecided = GRAPHS[name]
    info = read_model(model(nodes, inputs, ["y"], initializers))
    info.source = "m.onnx"
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always", ONNXImportWarning)
        assert parameter_names(info) == expected
    messages = [str(w.message) for w in warned]
    if not undecided:
        assert messages == []
        return
    (message,) = messages
    listed = ", ".join(f"'{n}' {initializers[n].shape}" for n in undecided)
    assert message.startswith(f"m.onnx: {len(undecided)} float initializer(s) read only by "
                              f"element-wise operators") and f"kept constant: {listed};" in message
    assert message.endswith("ONNXModel(..., parameters=[...])")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ONNXImportWarning)
        assert parameter_names(info, expected | set(undecided)) == expected | set(undecided)


def test_naming_what_is_not_a_float_initializer_is_refused():
    nodes, inputs, initializers, *_ = GRAPHS["masks, scalars, integers and running statistics"]
    info = read_model(model(nodes, inputs, ["y"], initializers))
    with pytest.raises(ONNXImportError, match=r"parameters= names \['shape', 'nope'\]"):
        parameter_names(info, ["gamma", "shape", "nope"])


@pytest.mark.parametrize("transposed", [False, True])
def test_tied_or_shared_weights_are_warned_of(transposed):
    """One table read by an embedding and, transposed, by the output layer (the legacy
    exporter's tie), or the output layer reading a transposed copy of it (the current one's)."""
    table = randn(10, 4, seed=18)
    nodes = [node("Gather", ["table", "ids"], "e"), node("MatMul", ["e", "head"], "y")]
    initializers = {"table": table}
    if transposed:
        initializers["head"] = np.ascontiguousarray(table.T)
    else:
        nodes.insert(1, node("Transpose", ["table"], "head"))
    info = read_model(model(nodes, {"ids": np.zeros((2, 3), np.int64)}, ["y"], initializers))
    described = "'head' and 'table'" if transposed else "'table' by .*, .*"
    with pytest.warns(ONNXImportWarning, match=rf"tied ones.*: {described}"):
        parameter_names(info)


def test_a_broadcast_parameter_is_its_one_slice():
    row = randn(1, 1, 4, seed=19)
    copies = np.broadcast_to(row, (3, 5, 4))
    assert np.array_equal(broadcast_source(copies), row)
    positions = np.broadcast_to(randn(1, 5, 4, seed=20), (3, 5, 4))
    assert broadcast_source(positions).shape == (1, 5, 4)
    for kept in (randn(3, 5, seed=21), np.ones((3, 5), np.float32), randn(6, seed=22)):
        assert broadcast_source(kept) is kept  # varied, one value (a fresh scale), 1-d
