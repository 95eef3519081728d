"""Activation names, and how a layer applies one: fused into its FFModel op when the op supports
it (relu, sigmoid, tanh, gelu), otherwise as a separate op after it (softmax, elu)."""

from __future__ import annotations

from dataclasses import dataclass

from flexflow.core import ActiMode

FUSED = {None: ActiMode.AC_MODE_NONE, "linear": ActiMode.AC_MODE_NONE,
         "relu": ActiMode.AC_MODE_RELU, "sigmoid": ActiMode.AC_MODE_SIGMOID,
         "tanh": ActiMode.AC_MODE_TANH, "gelu": ActiMode.AC_MODE_GELU}
SEPARATE = ("softmax", "elu")
NAMES = tuple(name for name in FUSED if name) + SEPARATE


def emit_activation(ffmodel, tensor, activation: str, name: str):
    """`activation` as its own FFModel op on `tensor`."""
    if activation == "softmax":
        return ffmodel.softmax(tensor, -1, name=name)
    if activation == "linear":
        return ffmodel.identity(tensor, name=name)
    return getattr(ffmodel, activation)(tensor, name=name)


@dataclass(frozen=True)
class LayerActivation:
    """The activation argument of Dense/Conv2D, split into the fused mode and the op after."""

    fused: ActiMode
    after: str | None

    @classmethod
    def parse(cls, activation, layer_name: str) -> "LayerActivation":
        if activation in FUSED:
            return cls(FUSED[activation], None)
        if activation in SEPARATE:
            return cls(ActiMode.AC_MODE_NONE, activation)
        raise ValueError(f"layer '{layer_name}': unsupported activation {activation!r}; expected "
                         f"None or one of {NAMES}")

    def apply_after(self, ffmodel, tensor, layer_name: str):
        if self.after is None:
            return tensor
        return emit_activation(ffmodel, tensor, self.after, f"{layer_name}_{self.after}")
