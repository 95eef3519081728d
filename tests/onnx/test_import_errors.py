"""Malformed files and graphs, unsupported operators and attribute values, and inputs that do not
fit: each is an ONNXImportError naming the file, node, attribute or input, raised before any
layer is built."""

import numpy as np
import onnx
import pytest
from onnx import helper

from flexflow.core import DataType, FFConfig, FFModel
from flexflow.onnx import ONNXImportError, ONNXModel

from .graphs import model, randn, run_flexflow

X = randn(2, 4)


def gemm_model():
    return model([helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1)],
                 {"x": X}, ["y"], {"w": randn(3, 4, seed=1), "b": randn(3, seed=2)})


def ffmodel_with_input(batch=2, dims=(4,)):
    ffmodel = FFModel(FFConfig(argv=[], batch_size=batch))
    return ffmodel, ffmodel.create_tensor([batch, *dims], DataType.DT_FLOAT)


def test_missing_file(tmp_path):
    with pytest.raises(ONNXImportError, match="nothere.onnx: no such ONNX file"):
        ONNXModel(str(tmp_path / "nothere.onnx"))


def test_truncated_file(tmp_path):
    path = tmp_path / "truncated.onnx"
    data = gemm_model().SerializeToString()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(ONNXImportError, match="truncated.onnx.*truncated, or not ONNX"):
        ONNXModel(str(path))


@pytest.mark.parametrize("content", [b"not an onnx model at all\n", b"\x00\x01\x02\x03",
                                     b""])
def test_file_that_is_not_onnx(tmp_path, content):
    path = tmp_path / "other.onnx"
    path.write_bytes(content)
    with pytest.raises(ONNXImportError, match="other.onnx.*not"):
        ONNXModel(str(path))


def test_not_a_file_name_or_model():
    with pytest.raises(ONNXImportError, match="file name or an onnx.ModelProto, got int"):
        ONNXModel(42)


def test_cyclic_graph_names_the_nodes_in_the_cycle():
    nodes = [helper.make_node("Relu", ["x2"], ["x1"], name="first"),
             helper.make_node("Relu", ["x1"], ["x2"], name="second"),
             helper.make_node("Add", ["x", "x2"], ["y"], name="out")]
    with pytest.raises(ONNXImportError, match=r"cycle.*'first' \(Relu\).*'second' \(Relu\)"):
        ONNXModel(model(nodes, {"x": X}, ["y"]))


def test_missing_initializer_names_the_node_and_the_value():
    proto = gemm_model()
    del proto.graph.initializer[0]  # "w"
    with pytest.raises(ONNXImportError,
                       match=r"node 'fc' \(Gemm\) reads 'w'.*missing initializer"):
        ONNXModel(proto)


def test_malformed_initializer():
    proto = gemm_model()
    proto.graph.initializer[0].raw_data = proto.graph.initializer[0].raw_data[:10]
    with pytest.raises(ONNXImportError, match=r"initializer 'w' \(dims \[3, 4\]\) is malformed"):
        ONNXModel(proto)


def test_value_produced_twice():
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Sigmoid", ["x"], ["y"])]
    with pytest.raises(ONNXImportError, match="'y' is produced twice"):
        ONNXModel(model(nodes, {"x": X}, ["y"]))


def test_graph_output_nobody_produces():
    with pytest.raises(ONNXImportError, match="graph output 'z' is not produced"):
        ONNXModel(model([helper.make_node("Relu", ["x"], ["y"])], {"x": X}, ["z"]))


def test_unsupported_operator_lists_the_supported_ones():
    nodes = [helper.make_node("Relu", ["x"], ["h"]),
             helper.make_node("Hardmax", ["h"], ["y"], name="hm")]
    with pytest.raises(ONNXImportError) as error:
        ONNXModel(model(nodes, {"x": X}, ["y"]))
    message = str(error.value)
    assert "node 'hm' (Hardmax): operator Hardmax is not supported" in message
    assert "Supported operators: Add, And, AveragePool" in message and "Gemm" in message


def test_every_unsupported_node_is_reported_at_once_with_the_other_route():
    """Three nodes the importer cannot build, among ones it can: one error lists all three
    (operator, attribute value, other domain), and points at flexflow.torch."""
    nodes = [helper.make_node("Hardmax", ["x"], ["a"], name="hm"),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("LSTM", ["b3", "w", "r"], ["c"], name="rnn", hidden_size=2,
                              direction="reverse"),
             helper.make_node("Foo", ["b"], ["y"], name="custom", domain="com.example"),
             helper.make_node("Unsqueeze", ["b", "zero"], ["b3"])]
    with pytest.raises(ONNXImportError) as error:
        ONNXModel(model(nodes, {"x": X}, ["y", "c"],
                        {"w": randn(1, 8, 4, seed=1), "r": randn(1, 8, 2, seed=2),
                         "zero": np.array([0], np.int64)}))
    lines = str(error.value).splitlines()
    assert lines[0] == "<ModelProto>: 3 nodes cannot be imported:"
    assert [line.strip().split(":")[0] for line in lines[1:4]] == [  # in topological order
        "node 'hm' (Hardmax)", "node 'custom' (Foo)", "node 'rnn' (LSTM)"]
    assert "direction='reverse' is not supported" in lines[3]
    assert lines[4].startswith("Supported operators: Add, And,")
    assert "through flexflow.torch instead (PyTorchModel)" in lines[4]


def test_operator_of_another_domain():
    node = helper.make_node("Foo", ["x"], ["y"], name="custom", domain="com.example")
    with pytest.raises(ONNXImportError, match="operator com.example.Foo is not supported"):
        ONNXModel(model([node], {"x": X}, ["y"]))


@pytest.mark.parametrize("node, attribute", [
    (helper.make_node("Gelu", ["x"], ["y"], name="g", approximate="erf"), "approximate='erf'"),
    (helper.make_node("Pad", ["x", "p"], ["y"], name="g", mode="mirror"), "mode='mirror'"),
    (helper.make_node("MaxPool", ["x"], ["y"], name="g", kernel_shape=[2], storage_order=2),
     "storage_order=2"),
])
def test_unsupported_attribute_value_names_node_and_attribute(node, attribute):
    with pytest.raises(ONNXImportError,
                       match=rf"node 'g' \({node.op_type}\): attribute {attribute} is not "
                             rf"supported \(supported: "):
        ONNXModel(model([node], {"x": X}, ["y"], {"p": np.zeros(4, np.int64)}))


def test_apply_checks_every_node_before_building_any_layer():
    """Hardmax of a constant is folded at import; of a tensor it is unsupported, and apply finds
    that out before it builds the Relu that comes first."""
    nodes = [helper.make_node("Relu", ["x"], ["h"]),
             helper.make_node("Hardmax", ["c"], ["k"], name="hm"),
             helper.make_node("Add", ["h", "k"], ["y"])]
    onnx_model = ONNXModel(model(nodes, {"x": X, "c": X}, ["y"]), constant_inputs=["c"])
    ffmodel, x = ffmodel_with_input()
    with pytest.raises(ONNXImportError, match=r"'hm' \(Hardmax\): operator Hardmax is not"):
        onnx_model.apply(ffmodel, {"x": x, "c": ffmodel.create_tensor([2, 4])})
    assert [op.op_name for op in ffmodel.get_layers().values()] == []
    y = onnx_model.apply(ffmodel, {"x": x, "c": X})  # folded: fine
    assert y.dims == (2, 4)


def test_input_dict_must_name_the_graph_inputs():
    onnx_model = ONNXModel(gemm_model())
    ffmodel, x = ffmodel_with_input()
    with pytest.raises(ONNXImportError, match=r"missing \['x'\]; not inputs of the graph: "
                                              r"\['input.1'\]"):
        onnx_model.apply(ffmodel, {"input.1": x})


def test_input_dims_must_match_the_graph():
    onnx_model = ONNXModel(gemm_model())
    ffmodel, x = ffmodel_with_input(dims=(5,))
    with pytest.raises(ONNXImportError, match=r"input 'x' has dims \[2, 5\], the graph declares "
                                              r"\[2, 4\]"):
        onnx_model.apply(ffmodel, {"x": x})


def test_shape_computed_by_the_model_is_refused():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="r")]
    proto = model(nodes, {"x": X, "s": np.array([4, 2], np.int64)}, ["y"])
    ffmodel, x = ffmodel_with_input()
    shape = ffmodel.create_tensor([2], DataType.DT_INT64)
    with pytest.raises(ONNXImportError, match=r"node 'r' \(Reshape\): the shape input must be a "
                                              r"constant"):
        ONNXModel(proto).apply(ffmodel, {"x": x, "s": shape})


def test_backend_refuses_data_inputs_of_other_types_than_flexflow_s():
    proto = model([helper.make_node("Relu", ["x"], ["y"])], {"x": np.zeros((2, 3), np.uint8)},
                  ["y"])
    with pytest.raises(ONNXImportError, match="'x' is uint8, not one of FlexFlow's data types "
                                              r"\(bool, float32, float64, int32, int64\)"):
        run_flexflow(proto, np.zeros((2, 3), np.uint8))


def test_float_operators_refuse_integer_tensors():
    proto = model([helper.make_node("Relu", ["x"], ["y"])], {"x": np.zeros((2, 3), np.int32)},
                  ["y"])
    with pytest.raises(ONNXImportError, match=r"node 'y' \(Relu\): FlexFlow computes this "
                                              "operator in float32; an input is DT_INT32"):
        run_flexflow(proto, np.zeros((2, 3), np.int32))


def test_casts_to_other_types_than_flexflow_s_are_refused():
    proto = model([helper.make_node("Cast", ["x"], ["y"], to=onnx.TensorProto.FLOAT16)],
                  {"x": X}, ["y"])
    with pytest.raises(ONNXImportError, match=r"node 'y' \(Cast\): the target type is float16, "
                                              "not one of FlexFlow's data types"):
        run_flexflow(proto, X)


def test_sequence_inputs_are_refused():
    seq = helper.make_tensor_sequence_value_info("s", onnx.TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Identity", ["s"], ["y"])], "g", [seq],
                              [helper.make_empty_tensor_value_info("y")])
    with pytest.raises(ONNXImportError, match="graph input 's' is a sequence_type"):
        ONNXModel(helper.make_model(graph))
