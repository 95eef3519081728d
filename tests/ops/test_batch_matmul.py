import re

import pytest
import torch

from flexflow.ops.batch_matmul import BatchMatmul
from flexflow.ops.spec import DimKind, ShapeError, TensorSpec

from .op_check import check_op, check_partitioned, randn


@pytest.mark.parametrize("lead", [(3,), (2, 3), (1,)])
@pytest.mark.parametrize("m,k,n", [(4, 5, 6), (1, 3, 1), (5, 1, 2)])
def test_batch_matmul_matches_torch(lead, m, k, n):
    a, b = randn(*lead, m, k, seed=1), randn(*lead, k, n, seed=2)
    check_op(BatchMatmul(), [a, b], [], torch.matmul)


def test_batch_matmul_records_seq_length_dims():
    op = BatchMatmul(a_seq_length_dim=1, b_seq_length_dim=2)
    assert (op.a_seq_length_dim, op.b_seq_length_dim) == (1, 2)
    assert op.infer([TensorSpec((2, 3, 4)), TensorSpec((2, 4, 5))]) == (TensorSpec((2, 3, 5)),)


@pytest.mark.parametrize("dim", [0, 1, 2, 3])
def test_batch_matmul_partitions_tile_the_output(dim):
    op = BatchMatmul()
    a, b = randn(4, 3, 5, 6, seed=1), randn(4, 3, 6, 4, seed=2)
    assert op.dim_kinds([TensorSpec(a.shape), TensorSpec(b.shape)]) == (
        DimKind.SAMPLE, DimKind.ATTRIBUTE, DimKind.ATTRIBUTE, DimKind.ATTRIBUTE)
    check_partitioned(op, [a, b], [], dim)


@pytest.mark.parametrize("a,b", [((2, 3, 4), (2, 5, 6)),      # k differs
                                 ((2, 3, 4), (3, 4, 5)),      # leading dims differ
                                 ((3, 4), (4, 5)),            # rank 2
                                 ((2, 2, 3, 4), (2, 4, 5))])  # ranks differ
def test_batch_matmul_rejects_mismatched_shapes(a, b):
    with pytest.raises(ShapeError, match=re.escape(f"A {a} and B {b}")):
        BatchMatmul().infer([TensorSpec(a), TensorSpec(b)])


def test_batch_matmul_rejects_integer_operands():
    with pytest.raises(ShapeError, match="int64"):
        BatchMatmul().infer([TensorSpec((2, 3, 4), "int64"), TensorSpec((2, 4, 5))])
