"""The importer's behaviour beyond single conformance cases: FlexFlow's ONNXModel API,
initializers as weights, constant folding, trainable and frozen constants, older opsets, and the
operators composed from several layers, each checked against ONNX's reference implementation or
PyTorch."""

import warnings

import numpy as np
import pytest
import torch
from onnx import helper

from flexflow.core import (CompMode, DataType, FFConfig, FFModel, LossType, SGDOptimizer,
                           Tensor)
from flexflow.onnx import ONNXModel, ONNXModelKeras
from flexflow.onnx.errors import ONNXImportError, ONNXImportWarning

from .graphs import assert_matches_reference, model, randn, run_flexflow, run_reference

BATCH = 3


def new_ffmodel(batch=BATCH):
    return FFModel(FFConfig(argv=[], batch_size=batch))


def forward(ffmodel, x, data, outputs):
    ffmodel.compile(comp_mode=CompMode.INFERENCE)
    x.set_tensor(ffmodel, data)
    ffmodel.forward(training=False)
    return [o.get_tensor(ffmodel) for o in outputs]


# ---- FlexFlow's API -----------------------------------------------------------------------------
def test_onnx_model_reads_files_and_protos(tmp_path):
    proto = model([helper.make_node("Relu", ["input.1"], ["out"])], {"input.1": (BATCH, 4)},
                  ["out"])
    path = tmp_path / "m.onnx"
    path.write_bytes(proto.SerializeToString())
    for source in (str(path), path, proto):
        onnx_model = ONNXModel(source)
        assert list(onnx_model.inputs) == ["input.1"]
        assert onnx_model.inputs["input.1"].dims == [BATCH, 4]
        assert list(onnx_model.outputs) == ["out"]
    keras_model = ONNXModelKeras(str(path), FFConfig(argv=[]), None)
    ffmodel = new_ffmodel()
    x = ffmodel.create_tensor([BATCH, 4], DataType.DT_FLOAT)
    assert isinstance(keras_model.apply(ffmodel, {"input.1": x}), Tensor)


def test_several_outputs_come_back_as_a_list_in_graph_order():
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2),
             helper.make_node("Sigmoid", ["a"], ["sa"])]
    proto = model(nodes, {"x": (BATCH, 6)}, ["b", "sa"], opset=18)
    ffmodel = new_ffmodel()
    x = ffmodel.create_tensor([BATCH, 6], DataType.DT_FLOAT)
    outputs = ONNXModel(proto).apply(ffmodel, {"x": x})
    assert isinstance(outputs, list) and [o.dims for o in outputs] == [(BATCH, 3), (BATCH, 3)]
    data = randn(BATCH, 6)
    b, sa = forward(ffmodel, x, data, outputs)
    np.testing.assert_array_equal(b, data[:, 3:])
    np.testing.assert_allclose(sa, 1 / (1 + np.exp(-data[:, :3])), rtol=1e-6)


def test_initializers_become_the_layer_weights():
    w, b = randn(5, 4, seed=1), randn(5, seed=2)
    proto = model([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
                  {"x": (BATCH, 4)}, ["y"], {"w": w, "b": b})
    ffmodel = new_ffmodel()
    x = ffmodel.create_tensor([BATCH, 4], DataType.DT_FLOAT)
    y = ONNXModel(proto).apply(ffmodel, {"x": x})
    ffmodel.compile(comp_mode=CompMode.INFERENCE)
    dense = y.owner_op
    np.testing.assert_array_equal(dense.get_weight_tensor().get_weights(ffmodel), w)
    np.testing.assert_array_equal(dense.get_bias_tensor().get_weights(ffmodel), b)


def test_shape_gather_concat_reshape_folds_at_import():
    """The chain torch exports for x.view(x.size(0), -1): only the Reshape is a layer."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
             helper.make_node("Concat", ["batch1", "minus_one"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Relu", ["flat"], ["y"])]
    proto = model(nodes, {"x": (BATCH, 2, 3)}, ["y"],
                  {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64),
                   "minus_one": np.array([-1], np.int64)})
    ffmodel = new_ffmodel()
    x = ffmodel.create_tensor([BATCH, 2, 3], DataType.DT_FLOAT)
    y = ONNXModel(proto).apply(ffmodel, {"x": x})
    assert [op.op_name.split("_")[0] for op in ffmodel.get_layers().values()] == [
        "flat", "y"]  # the layers are named after their nodes' outputs
    assert [type(op).__name__ for op in ffmodel.get_layers().values()] == ["Reshape", "Relu"]
    data = randn(BATCH, 2, 3)
    (got,) = forward(ffmodel, x, data, [y])
    np.testing.assert_array_equal(got, run_reference(proto, data)[0])


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_gather_elements_of_constants_folds_along_any_size(axis):
    """A table of 100 along the gathered axis (ONNX's reference evaluates at most 64), negative
    indices counted from the end: torch.gather's result, added to the input."""
    table = randn(3, 100, seed=1)
    size = table.shape[axis]
    index = np.random.default_rng(2).integers(-size, size, (3, 32) if axis else (3, 100))
    nodes = [helper.make_node("GatherElements", ["table", "index"], ["picked"], axis=axis),
             helper.make_node("Add", ["x", "picked"], ["y"])]
    proto = model(nodes, {"x": index.shape}, ["y"], {"table": table, "index": index})
    ffmodel = new_ffmodel()
    x = ffmodel.create_tensor(list(index.shape), DataType.DT_FLOAT)
    y = ONNXModel(proto, parameters=[]).apply(ffmodel, {"x": x})
    assert len(ffmodel.get_layers()) == 2  # the folded constant and the Add
    data = randn(*index.shape, seed=3)
    want = data + torch.gather(torch.tensor(table), axis % 2,
                               torch.tensor(index % size)).numpy()
    np.testing.assert_array_equal(forward(ffmodel, x, data, [y])[0], want)


def test_gather_elements_out_of_range_is_refused_naming_the_node():
    nodes = [helper.make_node("GatherElements", ["table", "index"], ["picked"], axis=1,
                              name="pick"),
             helper.make_node("Add", ["x", "picked"], ["y"])]
    proto = model(nodes, {"x": (1, 2)}, ["y"],
                  {"table": randn(1, 3), "index": np.array([[0, 3]], np.int64)})
    ffmodel = new_ffmodel(1)
    x = ffmodel.create_tensor([1, 2], DataType.DT_FLOAT)
    with pytest.raises(ONNXImportError, match=r"'pick'.*indices must lie in \[-3, 2\]"):
        ONNXModel(proto, parameters=[]).apply(ffmodel, {"x": x})


def test_constant_outputs_come_back_as_arrays():
    proto = model([helper.make_node("Shape", ["x"], ["s"])], {"x": (BATCH, 7)}, ["s"])
    ffmodel = new_ffmodel()
    x = ffmodel.create_tensor([BATCH, 7], DataType.DT_FLOAT)
    shape = ONNXModel(proto).apply(ffmodel, {"x": x})
    assert isinstance(shape, np.ndarray) and shape.tolist() == [BATCH, 7]


def _scale_offset_step(**options):
    """y = x * scale + offset, scale an initializer read only by a Mul (the graph does not say
    whether it is a parameter), offset a Constant node; one SGD step. The weights of the model
    before and after it, by value: scale's and offset's."""
    scale, offset = randn(4, seed=1), randn(4, seed=2)
    nodes = [helper.make_node("Constant", [], ["offset"],
                              value=helper.make_tensor("v", 1, [4], offset)),
             helper.make_node("Mul", ["x", "scale"], ["scaled"]),
             helper.make_node("Add", ["scaled", "offset"], ["y"])]
    proto = model(nodes, {"x": (BATCH, 4)}, ["y"], {"scale": scale})
    ffmodel = new_ffmodel()
    x = ffmodel.create_tensor([BATCH, 4], DataType.DT_FLOAT)
    ONNXModel(proto, **options).apply(ffmodel, {"x": x})
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, 0.1),
                    loss_type=LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE)
    weights = [op.get_parameter_by_id(0) for op in ffmodel.get_layers().values()
               if op.get_number_parameters()]
    before = [p.get_weights(ffmodel) for p in weights]
    data, label = randn(BATCH, 4, seed=3), randn(BATCH, 4, seed=4)
    x.set_tensor(ffmodel, data)
    ffmodel.label_tensor.set_tensor(ffmodel, label)
    ffmodel.train_step()
    after = [p.get_weights(ffmodel) for p in weights]
    (scale_at,) = [i for i, w in enumerate(before) if np.array_equal(w, scale)]
    (offset_at,) = [i for i, w in enumerate(before) if np.array_equal(w, offset)]
    s = torch.tensor(scale, requires_grad=True)
    ((torch.tensor(data) * s + torch.tensor(offset) - torch.tensor(label)) ** 2).mean().backward()
    return {"scale": (scale, after[scale_at], (s - 0.1 * s.grad).detach().numpy()),
            "offset": (offset, after[offset_at])}


def test_an_initializer_the_graph_does_not_tell_stays_constant_with_a_warning():
    with pytest.warns(ONNXImportWarning, match=r"kept constant: 'scale' \(4,\); .*"
                                               r"ONNXModel\(\.\.\., parameters="):
        weights = _scale_offset_step()
    scale, after, _ = weights["scale"]
    np.testing.assert_array_equal(after, scale)
    np.testing.assert_array_equal(*weights["offset"])  # a Constant node never trains


def test_initializers_named_parameters_train_and_constant_nodes_do_not():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ONNXImportWarning)  # named: nothing left undecided
        weights = _scale_offset_step(parameters=["scale"])
    _, after, sgd = weights["scale"]
    np.testing.assert_allclose(after, sgd, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(*weights["offset"])


def test_numpy_inputs_are_constants():
    proto = model([helper.make_node("Add", ["x", "y"], ["z"])], {"x": (BATCH, 4), "y": (4,)},
                  ["z"])
    ffmodel = new_ffmodel()
    x = ffmodel.create_tensor([BATCH, 4], DataType.DT_FLOAT)
    bias = randn(4, seed=5)
    z = ONNXModel(proto).apply(ffmodel, {"x": x, "y": bias})
    data = randn(BATCH, 4)
    np.testing.assert_allclose(forward(ffmodel, x, data, [z])[0], data + bias, rtol=1e-6)


def test_embedding_lookup_from_an_initializer_table():
    """Integer indices pass through layout operators, then index the table."""
    table = randn(10, 4, seed=1)
    nodes = [helper.make_node("Unsqueeze", ["ids", "one"], ["ids3"]),
             helper.make_node("Transpose", ["ids3"], ["idsT"], perm=[0, 2, 1]),
             helper.make_node("Squeeze", ["idsT", "two"], ["ids2"]),
             helper.make_node("Gather", ["table", "ids2"], ["y"], axis=0)]
    proto = model(nodes, {"ids": np.zeros((BATCH, 5), np.int64)}, ["y"],
                  {"table": table, "one": np.array([1], np.int64),
                   "two": np.array([2], np.int64)})
    ffmodel = new_ffmodel()
    ids = ffmodel.create_tensor([BATCH, 5], DataType.DT_INT64)
    y = ONNXModel(proto).apply(ffmodel, {"ids": ids})
    data = np.random.default_rng(0).integers(0, 10, (BATCH, 5)).astype(np.int64)
    np.testing.assert_array_equal(forward(ffmodel, ids, data, [y])[0], table[data])


# ---- composed operators and older opsets, against ONNX's reference (or PyTorch) -----------------
X4 = randn(2, 3, 7, 6, seed=7)
X3 = randn(2, 3, 9, seed=8)
W4 = randn(4, 3, 3, 3, seed=9)


def torch_oracle(fn):
    """Expected output from PyTorch, where ONNX's reference implementation is wrong (GlobalMaxPool
    over 1-d, LRN over batches of more than one, Softmax/LogSoftmax before opset 13) or refuses
    (negative pads: numpy then)."""
    return lambda data: fn(torch.tensor(data)).numpy()


CASES = {
    "conv_dilated": ([helper.make_node("Conv", ["x", "w", "b"], ["y"], dilations=[2, 1],
                                       pads=[1, 0, 2, 1])],
                     X4, {"w": W4, "b": randn(4, seed=3)}, None, None),
    "conv_grouped_strided_same_lower": (
        [helper.make_node("Conv", ["x", "w"], ["y"], group=3, strides=[2, 2],
                          auto_pad="SAME_LOWER")],
        X4, {"w": randn(6, 1, 3, 2, seed=2)}, None, None),
    "conv_1d": ([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 2], strides=[2])],
                X3, {"w": randn(5, 3, 3, seed=4)}, None, None),
    "conv_3d": ([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 1, 0, 1, 1])],
                randn(2, 2, 4, 5, 3, seed=5),
                {"w": randn(3, 2, 2, 3, 2, seed=6), "b": randn(3, seed=7)}, None, None),
    "maxpool_1d_ceil": ([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3],
                                          strides=[2], ceil_mode=1)], X3, {}, None, None),
    "avgpool_ceil_include_pad": ([helper.make_node(
        "AveragePool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 0],
        ceil_mode=1, count_include_pad=1)], X4, {}, None, None),
    "globalmaxpool_1d": ([helper.make_node("GlobalMaxPool", ["x"], ["y"])], X3, {}, None,
                         torch_oracle(lambda x: x.amax(2, keepdim=True))),
    "lrn": ([helper.make_node("LRN", ["x"], ["y"], size=3, alpha=0.02, beta=0.7, bias=1.5)],
            X4, {}, None, torch_oracle(lambda x: torch.nn.functional.local_response_norm(
                x, 3, alpha=0.02, beta=0.7, k=1.5))),
    "sum": ([helper.make_node("Sum", ["x", "a", "b"], ["y"])], X3,
            {"a": randn(3, 9, seed=1), "b": randn(9, seed=2)}, None, None),
    "batchnorm_2d": ([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                       epsilon=1e-3)],
                     randn(4, 3, seed=1), {"s": randn(3, seed=2), "b": randn(3, seed=3),
                                           "m": randn(3, seed=4),
                                           "v": np.abs(randn(3, seed=5)) + 0.5}, None, None),
    "gemm_alpha_beta_matrix_bias": (
        [helper.make_node("Gemm", ["x", "w", "c"], ["y"], alpha=0.5, beta=2.0, transA=1)],
        randn(4, 2, seed=1), {"w": randn(4, 3, seed=2), "c": randn(2, 3, seed=3)}, None, None),
    "matmul_batched_constant": ([helper.make_node("MatMul", ["x", "w"], ["y"])], X3,
                                {"w": randn(2, 9, 4, seed=5)}, None, None),
    "matmul_vector_constant": ([helper.make_node("MatMul", ["x", "w"], ["y"])],
                               randn(6, seed=1), {"w": randn(6, 2, seed=2)}, None, None),
    "gelu_tanh": ([helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")], X3, {}, 20,
                  None),
    "elu_alpha": ([helper.make_node("Elu", ["x"], ["y"], alpha=0.3)], X3, {}, None, None),
    "leakyrelu_steep": ([helper.make_node("LeakyRelu", ["x"], ["y"], alpha=1.7)], X3, {}, None,
                        None),
    "slice_negative_step": ([helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])], X4,
                            {"s": np.array([-1, 1], np.int64), "e": np.array([0, 6], np.int64),
                             "a": np.array([2, 3], np.int64), "t": np.array([-2, 2], np.int64)},
                            None, None),
    "pad_reflect": ([helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")], X3,
                    {"p": np.array([0, 1, 2, 0, 0, 3], np.int64)}, None, None),
    "pad_constant_negative": ([helper.make_node("Pad", ["x", "p", "v"], ["y"])], X3,
                              {"p": np.array([0, 0, -2, 0, 1, 3], np.int64),
                               "v": np.array(0.25, np.float32)}, None,
                              lambda x: np.pad(x[:, :, 2:], ((0, 0), (0, 1), (0, 3)),
                                               constant_values=0.25)),
    "gather_repeats": ([helper.make_node("Gather", ["x", "i"], ["y"], axis=2)], X3,
                       {"i": np.array([[4, 3, 3], [-1, 0, 8]], np.int64)}, None, None),
    # opset 11 semantics: Softmax over all dims from `axis` on; attributes instead of inputs
    "softmax_opset11": ([helper.make_node("Softmax", ["x"], ["y"], axis=1)], X4, {}, 11,
                        torch_oracle(lambda x: torch.softmax(x.reshape(2, -1), 1).reshape(
                            x.shape))),
    "logsoftmax_opset11": ([helper.make_node("LogSoftmax", ["x"], ["y"])], X4, {}, 11,
                           torch_oracle(lambda x: torch.log_softmax(x.reshape(2, -1), 1).reshape(
                               x.shape))),
    "opset9_attributes": ([
        helper.make_node("Unsqueeze", ["x"], ["u"], axes=[1]),
        helper.make_node("Pad", ["u"], ["p"], pads=[0, 0, 0, 1, 0, 0, 0, 2], value=0.5),
        helper.make_node("Slice", ["p"], ["s"], starts=[1], ends=[8], axes=[3]),
        helper.make_node("Clip", ["s"], ["c"], min=-0.5, max=0.75),
        helper.make_node("Dropout", ["c"], ["y"], ratio=0.3)], X3, {}, 9, None),
    "split_and_reduce_opset11": ([
        helper.make_node("Split", ["x"], ["a", "b"], axis=2, split=[4, 5]),
        helper.make_node("ReduceSum", ["b"], ["rb"], axes=[2], keepdims=1),
        helper.make_node("Mul", ["a", "rb"], ["y"])], X3, {}, 11, None),
    "reduce_max_two_axes_opset13": ([helper.make_node("ReduceMax", ["x"], ["y"], axes=[1, 3],
                                                      keepdims=0)], X4, {}, 13, None),
    "reduce_min_axes_input": ([helper.make_node("ReduceMin", ["x", "a"], ["y"])], X4,
                              {"a": np.array([-1, 0], np.int64)}, None, None),
    "reduce_max_every_dim_kept": ([helper.make_node("ReduceMax", ["x"], ["y"])], X3, {}, None,
                                  None),
    "max_min_variadic": ([helper.make_node("Max", ["x", "a", "b"], ["m"]),
                          helper.make_node("Min", ["m", "c"], ["y"])], X3,
                         {"a": randn(3, 1, seed=1), "b": np.array(-0.2, np.float32),
                          "c": randn(9, seed=2)}, None, None),
    "log_softplus": ([helper.make_node("Exp", ["x"], ["e"]),
                      helper.make_node("Add", ["e", "one"], ["s"]),
                      helper.make_node("Log", ["s"], ["y"])], X3,
                     {"one": np.array(1.0, np.float32)}, None, None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_onnx_reference(name):
    nodes, data, initializers, opset, oracle = CASES[name]
    proto = model(nodes, {"x": data}, ["y"], initializers, opset)
    if oracle is None:
        assert_matches_reference(proto, data, rtol=1e-5, atol=1e-5)
    else:
        (got,) = run_flexflow(proto, data)
        np.testing.assert_allclose(got, oracle(data), rtol=1e-5, atol=1e-5)


def test_batch_norm_in_training_mode_without_statistics_outputs_is_a_flexflow_batch_norm():
    """Exported in training mode, its running statistics unused: FlexFlow's batch_norm layer,
    which in training uses the batch statistics, as PyTorch does."""
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                            training_mode=1, momentum=0.8)
    c = X4.shape[1]
    init = {"s": np.ones(c, np.float32), "b": np.zeros(c, np.float32),
            "m": np.zeros(c, np.float32), "v": np.ones(c, np.float32)}
    ffmodel = new_ffmodel(X4.shape[0])
    x = ffmodel.create_tensor(X4.shape, DataType.DT_FLOAT)
    y = ONNXModel(model([node], {"x": X4}, ["y"], init)).apply(ffmodel, {"x": x})
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, 0.0),
                    loss_type=LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE)
    x.set_tensor(ffmodel, X4)
    ffmodel.label_tensor.set_tensor(ffmodel, np.zeros(X4.shape, np.float32))
    ffmodel.train_step()
    bn = torch.nn.BatchNorm2d(c, momentum=0.2).train()
    want = bn(torch.tensor(X4)).detach().numpy()
    np.testing.assert_allclose(y.get_tensor(ffmodel), want, rtol=1e-4, atol=1e-5)
    running_mean = y.owner_op.get_parameter_by_id(2).get_weights(ffmodel)
    np.testing.assert_allclose(running_mean, bn.running_mean.numpy(), rtol=1e-5, atol=1e-6)
