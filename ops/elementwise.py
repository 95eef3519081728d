"""Element-wise operators: one input (`ElementUnary`) or two broadcast inputs (`ElementBinary`).

Every output element depends only on the input element(s) at the same position, so every output
dim splits without communication. This module also owns `independent_dim_kinds`, the SOAP kinds of
such dims, which the other layout-preserving operators (softmax, dropout, concat, ...) reuse.

Where torch is installed (ops/vendor.py) the activations run as one ATen call each way, and the
binary functions' forward as one torch call, which uses every thread torch has where NumPy uses
one; the other unary functions and the binary backward stay NumPy/CuPy expressions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from . import vendor
from .activation import activate, activate_backward, aten_activate, aten_activate_backward
from .base import Kept, Operator, float_like_input, float_operands, quiet, sum_to_shape
from .box import Box
from .spec import DimKind, ShapeError, TensorSpec


def independent_dim_kinds(rank: int, fixed: Sequence[int] = ()) -> tuple[DimKind | None, ...]:
    """Kinds of dims along which elements are computed independently: the batch dim (0) is
    SAMPLE, the others ATTRIBUTE, and the dims in `fixed` (e.g. a reduction axis) None."""
    return tuple(None if d in fixed else DimKind.SAMPLE if d == 0 else DimKind.ATTRIBUTE
                 for d in range(rank))


@dataclass(frozen=True)
class FuncFamily(Operator):
    """An operator family whose `func` field picks one entry of `FUNCS` (func -> FlexFlow's type
    name, used in default layer names); `FAMILY` names the family in errors."""

    func: str

    FUNCS: ClassVar[dict[str, str]]
    FAMILY: ClassVar[str]

    @property
    def type_name(self) -> str:
        return self.FUNCS.get(self.func, type(self).__name__)

    def expect_known_func(self) -> None:
        if self.func not in self.FUNCS:
            raise ShapeError(f"unknown {self.FAMILY} {self.func!r}; expected one of "
                             f"{tuple(self.FUNCS)}")


def pow_base_grad(xp, dy, x, e):
    """dy * d(x ** e) / dx for a tensor or scalar exponent e, taken as 0 where e == 0 (also at
    x == 0, where the formula's 0 * inf would be nan), as PyTorch defines it."""
    with quiet(xp):
        return xp.where(e == 0, 0, dy * e * xp.power(x, e - 1)).astype(dy.dtype, copy=False)


# ---- unary ------------------------------------------------------------------------------------


class Pointwise(Operator):
    """A function of one float tensor element by element: y has x's shape and dtype, and every
    dim splits without communication. `what` names it in errors. A subclass that is a function
    of x alone gives `apply` (y of x) and `derivative` (dy/dx at x); the backward keeps x."""

    what: ClassVar[str]

    def infer(self, inputs):
        return float_like_input(inputs, self.what)

    def dim_kinds(self, inputs):
        return independent_dim_kinds(inputs[0].ndim)

    def forward(self, xp, xs, ws, part):
        return [self.apply(xp, xs[0])], xs[0]

    def backward(self, xp, dys, saved, part):
        return [dys[0] * self.derivative(xp, saved)], []

    def apply(self, xp, x):
        raise NotImplementedError

    def derivative(self, xp, x):
        raise NotImplementedError


_ACTIVATION_FUNCS = {"relu": "ReLU", "sigmoid": "Sigmoid", "tanh": "Tanh", "elu": "Elu",
                     "gelu": "Gelu"}
_PLAIN_FUNCS = {"identity": "Identity", "exp": "Exp", "rsqrt": "Rsqrt"}
_SCALAR_FUNCS = {"pow": "Pow", "scalar_multiply": "ScalarMultiply", "scalar_add": "ScalarAdd",
                 "scalar_sub": "ScalarSub", "scalar_true_divide": "ScalarTrueDiv"}
UNARY_FUNCS = {**_ACTIVATION_FUNCS, **_PLAIN_FUNCS, **_SCALAR_FUNCS}


@dataclass(frozen=True)
class ElementUnary(FuncFamily, Pointwise):
    """y = func(x), or y = x <op> scalar for pow and the scalar_* funcs (scalar = the exponent or
    the operand; the other funcs take no scalar)."""

    scalar: float | None = None

    FUNCS = UNARY_FUNCS
    FAMILY = "element-wise function"

    def infer(self, inputs):
        spec = float_like_input(inputs, self.func)
        self.expect_known_func()
        needs_scalar = self.func in _SCALAR_FUNCS
        if needs_scalar != (self.scalar is not None):
            wanted = "a scalar" if needs_scalar else "no scalar"
            raise ShapeError(f"{self.func} takes {wanted}, got scalar={self.scalar!r}")
        if self.func == "scalar_true_divide" and self.scalar == 0:
            raise ShapeError("scalar_true_divide by 0")
        return spec

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        func = self.func
        if func in _ACTIVATION_FUNCS:
            aten = vendor.aten(xp)
            if aten is not None:
                y, saved = aten_activate(aten, func, aten.tensor(x))
                return [aten.array(y)], vendor.Saved(aten, (saved,))
            y, saved = activate(xp, func, x)
            return [y], saved
        # float() keeps a numpy float64 scalar from promoting a float32 tensor.
        s = None if self.scalar is None else float(self.scalar)
        if func == "identity":
            return [x], None
        if func == "exp":
            y = xp.exp(x)
            return [y], y
        if func == "rsqrt":
            y = 1.0 / xp.sqrt(x)
            return [y], y
        if func == "pow":
            return [x ** s], x
        if func == "scalar_multiply":
            return [x * s], None
        if func == "scalar_add":
            return [x + s], None
        if func == "scalar_sub":
            return [x - s], None
        return [x / s], None  # scalar_true_divide

    def kept_for_backward(self, inputs):
        """Its result for the functions whose derivative follows from it, its argument for
        GELU and pow, nothing for the others."""
        if self.func in ("gelu", "pow"):
            return Kept(inputs=(0,))
        if self.func in ("relu", "sigmoid", "tanh", "elu", "exp", "rsqrt"):
            return Kept(outputs=(0,))
        return Kept()

    def backward(self, xp, dys, saved, part):
        (dy,) = dys
        func = self.func
        if isinstance(saved, vendor.Saved):
            aten, (saved,) = saved.aten, saved.values
            return [aten.array(aten_activate_backward(aten, func, aten.tensor(dy), saved))], []
        if func in _ACTIVATION_FUNCS:
            return [activate_backward(xp, func, dy, saved)], []
        s = None if self.scalar is None else float(self.scalar)
        if func == "exp":
            dx = dy * saved
        elif func == "rsqrt":
            dx = -0.5 * dy * saved * saved * saved
        elif func == "pow":
            dx = pow_base_grad(xp, dy, saved, s)
        elif func == "scalar_multiply":
            dx = dy * s
        elif func == "scalar_true_divide":
            dx = dy / s
        else:  # identity, scalar_add, scalar_sub
            dx = dy
        return [dx], []


# ---- binary -----------------------------------------------------------------------------------

BINARY_FUNCS = {"add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div",
                "maximum": "Max", "minimum": "Min"}


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcast of two shapes; ShapeError naming both when they do not broadcast."""
    rank = max(len(a), len(b))
    a1 = (1,) * (rank - len(a)) + tuple(a)
    b1 = (1,) * (rank - len(b)) + tuple(b)
    if any(m != n and 1 not in (m, n) for m, n in zip(a1, b1)):
        raise ShapeError(f"shapes {tuple(a)} and {tuple(b)} do not broadcast (each dim, aligned "
                         f"from the right, must be equal or 1)")
    return tuple(max(m, n) for m, n in zip(a1, b1))


def broadcast_box(out_box: Box, shape: Sequence[int]) -> Box:
    """The box of an input of `shape`, broadcast to the output, that `out_box` reads: missing
    leading dims dropped and size-1 dims read whole."""
    bounds = out_box.bounds[out_box.ndim - len(shape):]
    return Box(tuple((0, 1) if n == 1 else b for b, n in zip(bounds, shape)))


class Broadcasting(Operator):
    """The splitting of an element-wise operator whose inputs broadcast to its output: every
    output dim splits, and a broadcast input is read whole along its size-1 dims (read by every
    partition of the output dims it is broadcast along, so its gradient is summed over those dims
    by the kernel and across partitions by the executor)."""

    def dim_kinds(self, inputs):
        return independent_dim_kinds(self.infer(inputs)[0].ndim)

    def input_box(self, out_box, inputs, index):
        return broadcast_box(out_box, inputs[index].shape)


LINEAR_BINARY_FUNCS = ("add", "subtract")


@dataclass(frozen=True)
class _Shape:
    """An operand's shape, all a sum's backward needs of it (`sum_to_shape` reads `.shape`)."""

    shape: tuple[int, ...]


@dataclass(frozen=True)
class ElementBinary(FuncFamily, Broadcasting):
    """y = func(a, b) with numpy broadcasting of a and b (either may broadcast)."""

    FUNCS = BINARY_FUNCS
    FAMILY = "element-wise function"

    def infer(self, inputs):
        a, b = float_operands(inputs, self.func, ("input 0", "input 1"))
        self.expect_known_func()
        return (TensorSpec(broadcast_shape(a.shape, b.shape), a.dtype),)

    def forward(self, xp, xs, ws, part):
        a, b = xs
        # a sum or a difference needs only its operands' shapes for backward
        saved = (a, b) if self.func not in LINEAR_BINARY_FUNCS else (_Shape(a.shape),
                                                                       _Shape(b.shape))
        aten = vendor.aten(xp)
        if aten is not None:  # one pass, on every thread torch has
            y = getattr(aten.torch, self.func)(aten.tensor(a), aten.tensor(b))
            return [aten.array(y)], saved
        ops = {"add": lambda: a + b, "subtract": lambda: a - b, "multiply": lambda: a * b,
               "divide": lambda: a / b, "maximum": lambda: xp.maximum(a, b),
               "minimum": lambda: xp.minimum(a, b)}
        return [ops[self.func]()], saved

    def kept_for_backward(self, inputs):
        return Kept() if self.func in LINEAR_BINARY_FUNCS else Kept(inputs=(0, 1))

    def backward(self, xp, dys, saved, part):
        a, b = saved
        (dy,) = dys
        func = self.func
        if func == "add":
            da, db = dy, dy
        elif func == "subtract":
            da, db = dy, -dy
        elif func == "multiply":
            da, db = dy * b, dy * a
        elif func == "divide":
            da = dy / b
            db = -da * a / b
        else:
            # Ties share the gradient equally, as in PyTorch.
            wins = (a > b) if func == "maximum" else (a < b)
            weight = (wins + 0.5 * (a == b)).astype(dy.dtype, copy=False)
            da, db = dy * weight, dy * (1.0 - weight)
        return [sum_to_shape(xp, da, a.shape), sum_to_shape(xp, db, b.shape)], []
