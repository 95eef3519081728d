"""The contract every operator implements.

An operator is a small frozen object holding its attributes (kernel size, axis, ...). It answers
four kinds of question, all without data: what shapes come out (`infer`), what weights it owns
(`weight_specs`), how its output may be split (`dim_kinds`) and what input/weight boxes one output
box needs (`input_box`, `weight_box`), and what it costs (`flops`, `bytes`). Its kernels
(`forward`, `backward`) are written once against an array module `xp` (numpy or cupy) and compute
one partition, described by a `Part`; on one device the part is the whole tensor.

Gradient conventions, which the executor relies on:
* `backward` returns one gradient per input, shaped like the input box it was given (None for
  integer inputs), and one per weight, shaped like the weight box it was given;
* these are partial sums: when several partitions read the same input or weight region the
  executor adds their contributions, so a kernel never reduces across partitions itself.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from .box import Box
from .spec import DimKind, ShapeError, TensorSpec, WeightSpec


@dataclass(frozen=True)
class Part:
    """Which piece of an operator a kernel call computes.

    `out_boxes` are the boxes of each output being computed, `in_boxes` the boxes of the input
    arrays handed to the kernel (which may be clipped at tensor borders, e.g. a convolution halo),
    `in_shapes` the full input shapes. `seed` makes random ops (dropout) a pure function of
    (seed, global element index), so every split of a tensor draws the same numbers.
    """

    out_boxes: tuple[Box, ...]
    in_boxes: tuple[Box, ...]
    in_shapes: tuple[tuple[int, ...], ...]
    training: bool = True
    seed: int = 0
    reduced: Any = None  # partials of all partitions combined (see Operator.reduction_dims)
    # what this partition's `forward_partial` made for its forward to keep (`MadePartial`)
    made: Any = None
    input_grads: tuple[bool, ...] = ()  # per input, whether its gradient is wanted; () = all
    fed: tuple[bool, ...] = ()  # per input, whether it is fed (checked as loaded); () = none
    share: int = 0  # its place among the partitions of a contraction split (attention: heads)

    def wants_grad(self, index: int) -> bool:
        """Kernels may skip (and return None for) gradients nobody reads, e.g. a model input's."""
        return not self.input_grads or self.input_grads[index]

    def is_fed(self, index: int) -> bool:
        """Whether input `index` is fed from outside, its pieces checked on the host as they
        are loaded (scheduler/fed_checks.py)."""
        return bool(self.fed) and self.fed[index]

    @staticmethod
    def whole(inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], training: bool = True,
              seed: int = 0) -> "Part":
        return Part(out_boxes=tuple(Box.full(t.shape) for t in outputs),
                    in_boxes=tuple(Box.full(t.shape) for t in inputs),
                    in_shapes=tuple(t.shape for t in inputs), training=training, seed=seed)

    @property
    def out_box(self) -> Box:
        return self.out_boxes[0]


@dataclass(frozen=True)
class Kept:
    """What an operator's training forward keeps for its backward, for the memory model
    (scheduler/simulator.py): its inputs numbered in `inputs` and its outputs in `outputs` (the
    arrays the device holds for them, kept alive until backward), and new arrays of `extra`
    bytes per element of its first output. Small arrays (per channel, shapes) are not counted.
    tests/ops/test_kept.py checks each declaration against what the forward keeps."""

    inputs: tuple[int, ...] = ()
    outputs: tuple[int, ...] = ()
    extra: float = 0.0


@dataclass(frozen=True)
class Contraction:
    """A dim an operator sums over (a dense layer's input features), which a strategy may split
    as well as its output (`ParallelConfig.contraction`, Megatron's row-parallel layer) into a
    count of parts dividing `size`: each of a box's partitions then reads its equal slice of the
    input and weight dims named here (`inputs`, `weights`: (index, dim) pairs, whose extent is
    a multiple of `size`), `forward_partial` makes its share of the output,
    and the group's sum is the output's value on every one of them. The weights in `first_only`
    (a bias, which the sum must add once) are read by the first partition of a box alone."""

    size: int
    inputs: tuple[tuple[int, int], ...]
    weights: tuple[tuple[int, int], ...]
    first_only: tuple[int, ...] = ()
    # what a partition keeps beyond its inputs and outputs (`Kept.extra`) is its slice's alone
    # (an attention's heads' projections and weights): the whole's over the count
    kept_cut: bool = False
    what: str = "features"  # what `size` counts, in messages


@dataclass(frozen=True)
class MadePartial:
    """What `forward_partial` returns where the partition's forward keeps for backward what the
    partial made (an attention's projections and weights of its heads): `value`, its share of
    the output, is summed with the group's; `made` reaches its forward as `Part.made`."""

    value: Any
    made: Any


def split_partial(partial) -> tuple[Any, Any]:
    """(the value to combine, what the forward keeps or None) of a `forward_partial` result."""
    if type(partial) is MadePartial:
        return partial.value, partial.made
    return partial, None


def activation_kept(mode: str, itemsize: int = 4) -> Kept:
    """What a fused activation (ops/activation.py) keeps: its result (the op's output) for
    ReLU, sigmoid, tanh and ELU, a copy of its argument for GELU, nothing without one."""
    if mode == "none":
        return Kept()
    if mode == "gelu":
        return Kept(extra=itemsize)
    return Kept(outputs=(0,))


class Operator:
    """Base class; subclasses are frozen dataclasses of the operator's attributes."""

    type_name: str = "Op"  # FlexFlow's C++ type name, used in default layer names ("Dense_100")
    #: fields that FlexFlow scripts give as lists of ints, stored as tuples of ints (hashable)
    int_tuples: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        for name in self.int_tuples:
            object.__setattr__(self, name, tuple(int(n) for n in getattr(self, name)))

    # ---- shapes and weights -------------------------------------------------------------------
    def infer(self, inputs: Sequence[TensorSpec]) -> tuple[TensorSpec, ...]:
        raise NotImplementedError

    def weight_specs(self, inputs: Sequence[TensorSpec]) -> tuple[WeightSpec, ...]:
        return ()

    # ---- kernels ------------------------------------------------------------------------------
    def forward(self, xp, xs: Sequence[Any], ws: Sequence[Any], part: Part) -> tuple[list, Any]:
        """Returns (outputs, saved); `saved` is whatever backward needs."""
        raise NotImplementedError

    def backward(self, xp, dys: Sequence[Any], saved: Any, part: Part) -> tuple[list, list]:
        """Returns (input gradients, weight gradients) for the boxes of `part`."""
        raise NotImplementedError

    def kept_for_backward(self, inputs: Sequence[TensorSpec]) -> Kept:
        """What `forward` keeps for `backward` in training (`Kept`); by default its inputs."""
        return Kept(inputs=tuple(range(len(inputs))))

    # ---- parallelism --------------------------------------------------------------------------
    def dim_kinds(self, inputs: Sequence[TensorSpec]) -> tuple[DimKind | None, ...]:
        """Per output dim: how it may be split (None: never). Default: only the batch dim."""
        rank = self.infer(inputs)[0].ndim
        return (DimKind.SAMPLE,) + (None,) * (rank - 1)

    def input_box(self, out_box: Box, inputs: Sequence[TensorSpec], index: int) -> Box:
        """The box of input `index` needed to compute `out_box`. Default: the same box."""
        return out_box

    def weight_box(self, out_box: Box, inputs: Sequence[TensorSpec], index: int) -> Box:
        """The box of weight `index` needed to compute `out_box`. Default: all of it."""
        return Box.full(self.weight_specs(inputs)[index].shape)

    # ---- cross-partition reductions -----------------------------------------------------------
    # Ops whose math spans an output dim (batch-norm statistics, softmax's normaliser) may still
    # split it: they name it in `reduction_dims`, and the executor then runs `forward_partial` on
    # every partition, combines the partials of partitions that differ only along those dims (in
    # partition order, so every device gets identical numbers) and passes the result to forward
    # as `part.reduced`; likewise `backward_partial` for backward. Unsplit, `part.reduced` is None
    # and the kernel computes the statistic itself.
    reduction_dims: tuple[int, ...] = ()

    def contraction(self, inputs: Sequence[TensorSpec]) -> Contraction | None:
        """The dim a strategy may split with partial sums (`Contraction`); None: no such dim.
        With one split, `forward_partial` makes a partition's share of the output and
        `forward` finishes the group's sum (`part.reduced`); backward needs no partials."""
        return None

    def forward_partial(self, xp, xs, ws, part: Part):
        raise NotImplementedError

    def backward_partial(self, xp, dys, saved, part: Part):
        raise NotImplementedError

    def adds_partials(self, phase: str) -> bool:
        """Whether `combine` merges the partials of `phase` by adding them (so that a sum over
        the devices, an all-reduce, can combine them)."""
        return True

    def combine(self, xp, partials: Sequence[Any], phase: str):
        """Merge the partials of `phase` ("forward" or "backward"); default: their sum."""
        total = partials[0]
        for partial in partials[1:]:
            total = total + partial
        return total

    def first_partition_weights(self) -> tuple[int, ...]:
        """The weights (by index) that forward changes and only the first partition of each
        weight box keeps current (batch norm's running statistics): the box's other holders
        must be brought level with the first's before an inference pass reads them."""
        return ()

    # ---- cost ---------------------------------------------------------------------------------
    def flops(self, inputs: Sequence[TensorSpec]) -> int:
        """Forward floating-point operations for the whole tensor (backward ~ 2x)."""
        return sum(t.size for t in self.infer(inputs))

    def bytes(self, inputs: Sequence[TensorSpec]) -> int:
        """Bytes a forward pass reads and writes."""
        return (sum(t.nbytes for t in inputs) + sum(t.nbytes for t in self.infer(inputs))
                + sum(w.spec.nbytes for w in self.weight_specs(inputs)))


@dataclass(frozen=True)
class AlongAxis(Operator):
    """An operator working along one `axis` of its input (negative counts from the end; the batch
    dim is 0); `what` names it in errors. Its default `infer` is for one float input whose shape
    and dtype the output keeps (softmax, log-softmax)."""

    axis: int

    what: ClassVar[str]

    def _axis(self, rank: int) -> int:
        return normalize_axis(self.axis, rank, self.what)

    def infer(self, inputs):
        spec = float_like_input(inputs, self.what)
        self._expect_axis(inputs[0])
        return spec

    def _expect_axis(self, spec: TensorSpec) -> None:
        """ShapeError naming the input's shape unless `axis` is one of its dims."""
        normalize_axis(self.axis, spec.ndim, f"{self.what} of shape {spec.shape}")


def expect_rank(inputs: Sequence[TensorSpec], index: int, ranks: Sequence[int], what: str) -> None:
    """Raise a ShapeError unless input `index` has one of `ranks`."""
    shape = inputs[index].shape
    if len(shape) not in ranks:
        wanted = " or ".join(f"{r}-d" for r in ranks)
        raise ShapeError(f"{what} must be {wanted}, got shape {shape}")


def expect_float(inputs: Sequence[TensorSpec], index: int, what: str) -> None:
    if not inputs[index].dtype.startswith("float"):
        raise ShapeError(f"{what} must be a float tensor, got {inputs[index].dtype}")


def expect_count(inputs: Sequence[TensorSpec], count: int, what: str) -> None:
    if len(inputs) != count:
        raise ShapeError(f"{what} takes {count} input(s), got {len(inputs)}")


def float_like_input(inputs: Sequence[TensorSpec], what: str) -> tuple[TensorSpec]:
    """The output spec of an operator on one float tensor whose result has the input's shape and
    dtype (an element-wise function, a softmax along an axis); ShapeError for anything else."""
    expect_count(inputs, 1, what)
    expect_float(inputs, 0, f"{what} input")
    return (TensorSpec(inputs[0].shape, inputs[0].dtype),)


def expect_one_dtype(a: TensorSpec, b: TensorSpec, what: str) -> None:
    """Raise a ShapeError unless the two operands `what` names have one dtype (no promotion)."""
    if a.dtype != b.dtype:
        raise ShapeError(f"{what} must have one dtype, got {a.dtype} {a.shape} and {b.dtype} "
                         f"{b.shape}")


def normalize_axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        raise ShapeError(f"{what}: axis {axis} is out of range for a {rank}-d tensor")
    return axis % rank


def float_operands(inputs: Sequence[TensorSpec], what: str,
                   names: tuple[str, str]) -> tuple[TensorSpec, TensorSpec]:
    """The two float operands of `what`, which `names` name in errors, checked to have one dtype
    (no operator promotes)."""
    expect_count(inputs, 2, f"{what} ({names[0]}, {names[1]})")
    for index, name in enumerate(names):
        expect_float(inputs, index, f"{what} {name}")
    a, b = inputs
    expect_one_dtype(a, b, f"{what} {names[0]} and {names[1]}")
    return a, b


def quiet(xp):
    """numpy's errstate silencing the divide-by-zero and invalid-value warnings of kernels whose
    inf and nan are the answers (log(0), log(-1), 0 ** -1); cupy does not warn, so there it is a
    no-op."""
    errstate = getattr(xp, "errstate", None)
    if errstate is None:
        return contextlib.nullcontext()
    return errstate(invalid="ignore", divide="ignore")


def sum_to_shape(xp, grad, shape: Sequence[int]):
    """Reduce a broadcast gradient back to `shape` (numpy broadcasting rules)."""
    shape = tuple(shape)
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad
