"""Operators given lists of ints (as FlexFlow scripts pass them) hold tuples of ints, so they stay
hashable and compare equal to the same operator built from tuples."""

import numpy as np
import pytest

from flexflow.ops.concat import Split
from flexflow.ops.layer_norm import LayerNorm
from flexflow.ops.reduce import Mean
from flexflow.ops.reshape import Reshape, Transpose
from flexflow.ops.weight import Weight


@pytest.mark.parametrize("make, field", [
    (lambda ints: Mean(ints), "dims"), (lambda ints: Weight(ints), "shape"),
    (lambda ints: Split(ints, 1), "sizes"), (lambda ints: LayerNorm(ints), "axes"),
    (lambda ints: Reshape(ints), "shape"), (lambda ints: Transpose(ints), "perm")])
def test_list_fields_become_tuples_of_ints(make, field):
    op = make([np.int64(1), 0])
    assert getattr(op, field) == (1, 0) and type(getattr(op, field)[0]) is int
    assert hash(op) == hash(make((1, 0))) and op == make((1, 0))
