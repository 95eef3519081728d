"""Values beyond float32 tensors through the importer: bool masks (comparisons, Where, Dropout's
mask), integer and float64 tensors (casts, integer arithmetic, MaxPool's Indices), values with
no elements and 0-d values, each checked against ONNX's reference implementation; and the
function-expanded forms exporters write (Less -> Where, ReduceMax -> Exp -> ReduceSum) training
like the operators they spell out."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from flexflow.core import DataType, FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.onnx import ONNXImportError, ONNXModel

from .graphs import assert_matches_reference, model, randn, run_flexflow

X = randn(4, 6, seed=1)
TIES = np.round(randn(2, 2, 5, 6, seed=2))  # repeated values, so max pools have ties
IDS = np.random.default_rng(3).integers(-7, 8, (4, 5)).astype(np.int64)


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, **attrs)


# (nodes, data input, initializers, outputs)
CASES = {
    "comparisons_and_where": (
        [node("Less", ["x", "c"], ["lt"]), node("GreaterOrEqual", ["x", "half"], ["ge"]),
         node("Equal", ["lt", "ge"], ["same"]), node("Where", ["lt", "x", "c"], ["low"]),
         node("Where", ["pattern", "low", "half"], ["y"])],
        X, {"c": randn(6, seed=4), "half": np.array(0.5, np.float32),
            "pattern": np.array([[True], [False], [True], [True]])}, ["lt", "same", "y"]),
    "integer_mask_and_arithmetic": (
        [node("Greater", ["x", "zero"], ["positive"]),
         node("Where", ["positive", "x", "seven"], ["chosen"]),
         node("Cast", ["chosen"], ["narrow"], to=TensorProto.INT32),
         node("Div", ["narrow", "divisors"], ["quotient"]),
         node("Mul", ["x", "x"], ["square"]),
         node("Sub", ["square", "x"], ["y"])],
        IDS, {"zero": np.array(0, np.int64), "seven": np.array(7, np.int64),
              "divisors": np.array([2, -3, 4, -5, 1], np.int32)}, ["positive", "quotient", "y"]),
    "casts": (
        [node("Cast", ["x"], ["i"], to=TensorProto.INT32),
         node("Cast", ["x"], ["b"], to=TensorProto.BOOL),
         node("Cast", ["x"], ["d"], to=TensorProto.DOUBLE),
         node("Constant", [], ["third"],
              value=helper.make_tensor("third", TensorProto.DOUBLE, [1], [1 / 3])),
         node("Mul", ["d", "third"], ["scaled"]),
         node("Cast", ["scaled"], ["y"], to=TensorProto.FLOAT)],
        np.round(X * 3, 1), {}, ["i", "b", "d", "y"]),
    "float64_data": (
        [node("Add", ["x", "x"], ["twice"]), node("Pow", ["twice", "two"], ["y"])],
        X.astype(np.float64), {"two": np.array(2.0, np.float64)}, ["y"]),
    "empty_slice_split_and_gather": (
        [node("Slice", ["x", "s", "e", "a"], ["none"]),
         node("Split", ["x", "sizes"], ["p", "q", "r"], axis=1),
         node("Gather", ["x", "no_ids"], ["picked"], axis=1)],
        X, {"s": np.array([7], np.int64), "e": np.array([9], np.int64),
            "a": np.array([1], np.int64), "sizes": np.array([2, 0, 4], np.int64),
            "no_ids": np.zeros((2, 0), np.int64)}, ["none", "p", "q", "r", "picked"]),
    "empty_input": (
        [node("ReduceSum", ["x", "a"], ["y"], keepdims=1)],
        np.zeros((3, 0, 2), np.float32), {"a": np.array([1], np.int64)}, ["y"]),
    "zero_d_outputs": (
        [node("ReduceSum", ["x"], ["total"], keepdims=0), node("MatMul", ["row", "row"], ["dot"]),
         node("Slice", ["x", "s", "e"], ["corner"]), node("Squeeze", ["corner"], ["y"])],
        X, {"row": randn(6, seed=5), "s": np.array([1, 2], np.int64),
            "e": np.array([2, 3], np.int64)}, ["total", "dot", "y"]),
    "maxpool_indices_with_ties_and_padding": (
        [node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 2], strides=[2, 1],
              pads=[1, 0, 1, 1], ceil_mode=1)], TIES, {}, ["y", "i"]),
    "maxpool_indices_column_major": (
        [node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 3], strides=[1, 2],
              storage_order=1)],
        TIES, {}, ["y", "i"]),
    "maxpool_indices_3d": (
        [node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2, 2], strides=[1, 2, 1])],
        np.round(randn(1, 2, 3, 4, 3, seed=6)), {}, ["y", "i"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_onnx_reference(name):
    """(The reference implementation's MaxPool Indices are right only with a stride other than
    1, hence the strides in those cases; ONNX's own cases check stride 1.)"""
    nodes, data, initializers, outputs = CASES[name]
    proto = model(nodes, {"x": data}, outputs, initializers)
    assert_matches_reference(proto, data)


def test_a_float64_parameter_that_float32_cannot_hold_is_refused():
    """Weights are float32: a float64 initializer used as a float64 operand must fit one."""
    proto = model([node("Mul", ["x", "third"], ["y"])], {"x": X.astype(np.float64)}, ["y"],
                  {"third": np.array([1 / 3, 0.5], np.float64)})
    with pytest.raises(ONNXImportError, match=r"node 'y' \(Mul\): a constant input of shape "
                                              r"\(2,\) cannot be a DT_DOUBLE tensor"):
        run_flexflow(proto, X.astype(np.float64))


def test_a_0d_value_read_by_another_node_is_refused():
    proto = model([node("ReduceMax", ["x"], ["m"], keepdims=0), node("Sub", ["x", "m"], ["y"])],
                  {"x": X}, ["y"])
    with pytest.raises(ONNXImportError, match=r"node 'y' \(Sub\): it reads 'm', a 0-d value"):
        run_flexflow(proto, X)


def test_onnx_model_names_its_0d_outputs():
    proto = model([node("ReduceSum", ["x"], ["total"], keepdims=0), node("Relu", ["x"], ["y"])],
                  {"x": X}, ["total", "y"])
    ffmodel = FFModel(FFConfig(argv=[], batch_size=4))
    x = ffmodel.create_tensor(X.shape, DataType.DT_FLOAT)
    onnx_model = ONNXModel(proto)
    total, _ = onnx_model.apply(ffmodel, {"x": x})
    assert total.dims == (1,) and onnx_model.zero_d_outputs == {"total"}


def dropout_with_mask(ratio, data):
    """y, mask of a Dropout after one training step (forward in training mode) and after an
    inference forward."""
    proto = model([node("Dropout", ["x", "r"], ["d", "mask"]), node("Identity", ["d"], ["y"])],
                  {"x": data}, ["y", "mask"], {"r": np.array(ratio, np.float32)})
    ffmodel = FFModel(FFConfig(argv=[], batch_size=data.shape[0]))
    x = ffmodel.create_tensor(data.shape, DataType.DT_FLOAT)
    y, mask = ONNXModel(proto).apply(ffmodel, {"x": x})
    ffmodel.identity(y)  # the loss reads a float output
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, 0.0),
                    loss_type=LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE)
    x.set_tensor(ffmodel, data)
    ffmodel.label_tensor.set_tensor(ffmodel, np.zeros(data.shape, np.float32))
    ffmodel.forward()  # training mode, every value kept (a train_step keeps only outputs)
    training = y.get_tensor(ffmodel), mask.get_tensor(ffmodel)
    ffmodel.forward(training=False)
    return training, (y.get_tensor(ffmodel), mask.get_tensor(ffmodel))


def test_dropout_mask_is_the_mask_dropout_applied():
    data = randn(8, 64, seed=7)
    (y, mask), (y_inference, mask_inference) = dropout_with_mask(0.25, data)
    assert mask.dtype == np.bool_ and 0.65 < mask.mean() < 0.85
    np.testing.assert_allclose(y, np.where(mask, data / 0.75, 0), rtol=1e-6)
    assert mask_inference.all()
    np.testing.assert_array_equal(y_inference, data)


def train_one_step(nodes, weight, data, label, argv=()):
    """The dense weight after one SGD step of `nodes` (reading x @ w.T as "h") on MSE."""
    proto = model([node("Gemm", ["x", "w"], ["h"], transB=1)] + nodes, {"x": data}, ["y"],
                  {"w": weight}, opset=18)
    ffmodel = FFModel(FFConfig(argv=list(argv), batch_size=data.shape[0]))
    x = ffmodel.create_tensor(data.shape, DataType.DT_FLOAT)
    y = ONNXModel(proto).apply(ffmodel, {"x": x})
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, 0.5),
                    loss_type=LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE)
    x.set_tensor(ffmodel, data)
    ffmodel.label_tensor.set_tensor(ffmodel, label)
    ffmodel.train_step()
    dense = next(op for op in ffmodel.get_layers().values() if op.get_number_parameters())
    return dense.get_parameter_by_id(0).get_weights(ffmodel)


EXPANDED = {  # operator -> (its node, the function-expanded nodes ONNX defines for it)
    "softmax": ([node("Softmax", ["h"], ["y"], axis=0)],
                [node("ReduceMax", ["h", "axes"], ["m"]), node("Sub", ["h", "m"], ["s"]),
                 node("Exp", ["s"], ["e"]), node("ReduceSum", ["e", "axes"], ["t"]),
                 node("Div", ["e", "t"], ["y"])]),
    "logsoftmax": ([node("LogSoftmax", ["h"], ["y"])],
                   [node("ReduceMax", ["h", "last"], ["m"]), node("Sub", ["h", "m"], ["s"]),
                    node("Exp", ["s"], ["e"]), node("ReduceSum", ["e", "last"], ["t"]),
                    node("Log", ["t"], ["l"]), node("Sub", ["s", "l"], ["y"])]),
    "leakyrelu": ([node("LeakyRelu", ["h"], ["y"], alpha=0.2)],
                  [node("Less", ["h", "zero"], ["neg"]), node("Mul", ["h", "alpha"], ["a"]),
                   node("Where", ["neg", "a", "h"], ["y"])]),
    "clip": ([node("Clip", ["h", "low", "high"], ["y"])],
             [node("Less", ["h", "low"], ["under"]), node("Where", ["under", "low", "h"], ["c"]),
              node("Less", ["high", "c"], ["over"]), node("Where", ["over", "high", "c"], ["y"])]),
}
CONSTANTS = [node("Constant", [], [name], value=helper.make_tensor(name, dtype, dims, values))
             for name, dtype, dims, values in [
                 ("axes", TensorProto.INT64, [1], [0]), ("last", TensorProto.INT64, [1], [-1]),
                 ("zero", TensorProto.FLOAT, [], [0.0]), ("alpha", TensorProto.FLOAT, [], [0.2]),
                 ("low", TensorProto.FLOAT, [], [-0.3]), ("high", TensorProto.FLOAT, [], [0.4])]]


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("name", list(EXPANDED))
def test_expanded_forms_train_like_their_operator(name, devices):
    """On one device, and data parallel on two (masks and maxima split by samples)."""
    operator, expanded = EXPANDED[name]
    weight = 0.2 * randn(5, 6, seed=8)  # products around the clipping bounds
    data, label = randn(4, 6, seed=9), randn(4, 5, seed=10)
    want = train_one_step(CONSTANTS + operator, weight, data, label)
    got = train_one_step(CONSTANTS + expanded, weight, data, label,
                         ["-ll:gpu", str(devices), "--in-process"])
    assert not np.allclose(want, weight)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
