import numpy as np
import pytest
import torch
import torch.nn.functional as F

from flexflow.ops.box import Box
from flexflow.ops.elementwise import ElementBinary, ElementUnary
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn, spec_of

S, A = DimKind.SAMPLE, DimKind.ATTRIBUTE

# (func, scalar, torch reference, needs positive input, FlexFlow type name)
UNARY = [
    ("relu", None, torch.relu, False, "ReLU"),
    ("sigmoid", None, torch.sigmoid, False, "Sigmoid"),
    ("tanh", None, torch.tanh, False, "Tanh"),
    ("elu", None, F.elu, False, "Elu"),
    ("gelu", None, F.gelu, False, "Gelu"),
    ("identity", None, lambda x: x * 1.0, False, "Identity"),
    ("exp", None, torch.exp, False, "Exp"),
    ("rsqrt", None, torch.rsqrt, True, "Rsqrt"),
    ("pow", 2.0, lambda x: torch.pow(x, 2.0), False, "Pow"),
    ("pow", 3.0, lambda x: torch.pow(x, 3.0), False, "Pow"),
    ("pow", 0.5, lambda x: torch.pow(x, 0.5), True, "Pow"),
    ("pow", -1.5, lambda x: torch.pow(x, -1.5), True, "Pow"),
    ("scalar_multiply", 2.5, lambda x: x * 2.5, False, "ScalarMultiply"),
    ("scalar_add", 1.5, lambda x: x + 1.5, False, "ScalarAdd"),
    ("scalar_sub", 0.75, lambda x: x - 0.75, False, "ScalarSub"),
    ("scalar_true_divide", -4.0, lambda x: x / -4.0, False, "ScalarTrueDiv"),
]
UNARY_IDS = [f"{f}-{s}" for f, s, *_ in UNARY]


def unary_input(shape, positive, seed=1):
    x = randn(*shape, seed=seed)
    return np.abs(x) + 0.5 if positive else x


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 5), (2, 3, 2, 4)])
@pytest.mark.parametrize("func, scalar, reference, positive, type_name", UNARY, ids=UNARY_IDS)
def test_unary_matches_torch(shape, func, scalar, reference, positive, type_name):
    op = ElementUnary(func, scalar)
    assert op.type_name == type_name
    check_op(op, [unary_input(shape, positive)], [], reference)


@pytest.mark.parametrize("func, scalar, reference, positive, type_name", UNARY, ids=UNARY_IDS)
def test_unary_partitions_tile_the_output(func, scalar, reference, positive, type_name):
    op = ElementUnary(func, scalar)
    x = unary_input((4, 3, 5), positive)
    assert op.dim_kinds([spec_of(x)]) == (S, A, A)
    for dim in range(3):
        check_partitioned(op, [x], [], dim)


def test_unary_numpy_scalar_keeps_float32():
    op = ElementUnary("scalar_multiply", np.float64(3.0))
    check_op(op, [randn(3, 4)], [], lambda x: x * 3.0)


@pytest.mark.parametrize("op, inputs, fragment", [
    (ElementUnary("softplus"), [TensorSpec((2, 3))], "softplus"),
    (ElementUnary("pow"), [TensorSpec((2, 3))], "scalar=None"),
    (ElementUnary("relu", 2.0), [TensorSpec((2, 3))], "scalar=2.0"),
    (ElementUnary("scalar_true_divide", 0.0), [TensorSpec((2, 3))], "by 0"),
    (ElementUnary("exp"), [TensorSpec((2, 3), "int32")], "int32"),
    (ElementUnary("exp"), [TensorSpec((2, 3)), TensorSpec((2, 3))], "2"),
])
def test_unary_rejects_bad_arguments(op, inputs, fragment):
    with pytest.raises(ShapeError, match=fragment):
        op.infer(inputs)


BINARY = {"add": (torch.add, "Add"), "subtract": (torch.sub, "Sub"),
          "multiply": (torch.mul, "Mul"), "divide": (torch.div, "Div"),
          "maximum": (torch.maximum, "Max"), "minimum": (torch.minimum, "Min")}
SHAPE_PAIRS = [((4, 3, 5), (4, 3, 5)), ((4, 6), (4, 6)), ((4, 3, 5), (3, 5)), ((3, 5), (4, 3, 5)),
               ((4, 1, 5), (4, 3, 1)), ((4, 3), (1,)), ((1,), (4, 3)), ((2, 1, 4, 5), (3, 1, 5))]
PAIR_IDS = [f"{a}+{b}" for a, b in SHAPE_PAIRS]


def binary_inputs(a_shape, b_shape):
    a = randn(*a_shape, seed=1)
    b = randn(*b_shape, seed=2)
    # Keep divisors away from zero so the division is well conditioned.
    return a, np.sign(b) * (np.abs(b) + 0.5)


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("func", list(BINARY))
def test_binary_matches_torch(shapes, func):
    reference, type_name = BINARY[func]
    op = ElementBinary(func)
    assert op.type_name == type_name
    check_op(op, list(binary_inputs(*shapes)), [], reference)


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("func", list(BINARY))
def test_binary_partitions_tile_the_output(shapes, func):
    op = ElementBinary(func)
    xs = list(binary_inputs(*shapes))
    kinds = op.dim_kinds([spec_of(x) for x in xs])
    assert kinds == (S,) + (A,) * (len(kinds) - 1)
    for dim in range(len(kinds)):
        check_partitioned(op, xs, [], dim)


def test_binary_ties_share_the_gradient_like_torch():
    a = np.array([[1.0, 2.0, 3.0]], np.float32)
    b = np.array([[1.0, 5.0, 3.0]], np.float32)
    for func in ("maximum", "minimum"):
        check_op(ElementBinary(func), [a, b], [], BINARY[func][0])


def test_binary_input_box_of_a_broadcast_input():
    op = ElementBinary("add")
    inputs = [TensorSpec((4, 1, 5)), TensorSpec((3, 1))]
    out_box = Box(((1, 3), (0, 2), (2, 4)))
    assert op.input_box(out_box, inputs, 0) == Box(((1, 3), (0, 1), (2, 4)))
    assert op.input_box(out_box, inputs, 1) == Box(((0, 2), (0, 1)))


@pytest.mark.parametrize("op, inputs, fragment", [
    (ElementBinary("add"), [TensorSpec((4, 3)), TensorSpec((5,))], r"\(4, 3\) and \(5,\)"),
    (ElementBinary("multiply"), [TensorSpec((2, 4, 3)), TensorSpec((3, 3))],
     r"\(2, 4, 3\) and \(3, 3\)"),
    (ElementBinary("add"), [TensorSpec((4, 3)), TensorSpec((4, 3), "float64")], "float64"),
    (ElementBinary("add"), [TensorSpec((4, 3), "int32"), TensorSpec((4, 3))], "int32"),
    (ElementBinary("power"), [TensorSpec((4, 3)), TensorSpec((4, 3))], "power"),
    (ElementBinary("add"), [TensorSpec((4, 3))], "1"),
])
def test_binary_rejects_bad_shapes(op, inputs, fragment):
    with pytest.raises(ShapeError, match=fragment):
        op.infer(inputs)
