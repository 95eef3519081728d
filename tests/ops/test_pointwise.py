"""What the element-wise operators of one float tensor (`elementwise.Pointwise`) share: they
refuse integer input, and FFModel builds them under their method's name."""

import pytest

from flexflow.ops.erf import Erf
from flexflow.ops.log import Log
from flexflow.ops.spec import ShapeError, TensorSpec

from .op_check import ffmodel_with_input, layer_op

OPS = [(Erf, "erf"), (Log, "log")]


@pytest.mark.parametrize("op, method", OPS)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_pointwise_op_rejects_integer_input(op, method, dtype):
    with pytest.raises(ShapeError, match=f"{method}.*{dtype}|{dtype}.*{method}"):
        op().infer([TensorSpec((2, 3), dtype)])


@pytest.mark.parametrize("op, method", OPS)
def test_ffmodel_builds_the_pointwise_layer(op, method):
    ffmodel, x = ffmodel_with_input(2, 3)
    y = getattr(ffmodel, method)(x, name="p")
    assert y.dims == (2, 3) and isinstance(layer_op(y), op)
