"""The optimizers' update rules as kernels: frozen values that update one weight (or one box of
it) in place on its device, with FlexFlow's update math (reference 2.7).

Where torch is installed an update is one pass over memory: torch's fused SGD and Adam kernels
on our buffers (ops/vendor.py). The reference kernels update in place with NumPy/CuPy `out=`
arithmetic. `flexflow/optimizers.py` keeps FlexFlow's constructors and hands these values to the
executor at every iteration, so a changed learning rate reaches the devices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from . import vendor


@dataclass(frozen=True)
class SGD:
    """g = grad + weight_decay*w; with momentum v = momentum*v + g, and g = g + momentum*v
    (nesterov) or v; w -= lr*g."""

    lr: float = 0.01
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0

    def init_state(self, xp, weight) -> dict[str, Any]:
        return {"v": xp.zeros_like(weight)} if self.momentum > 0 else {}

    def update(self, xp, weight, grad, state: dict, step: int, skip=None) -> None:
        """`step` counts the updates before this one (SGD has no use for it); the vendor
        kernels leave the weight and state alone where the device tensor `skip` is 1."""
        aten = vendor.aten(xp)
        if aten is not None:
            buffers = [aten.tensor(state["v"])] if self.momentum > 0 else []
            aten.torch._fused_sgd_([aten.tensor(weight)], [aten.tensor(grad)], buffers,
                                   weight_decay=self.weight_decay, momentum=self.momentum,
                                   lr=self.lr, dampening=0.0, nesterov=self.nesterov,
                                   maximize=False, is_first_step=False, found_inf=skip)
            return
        if self.weight_decay:
            grad = grad + self.weight_decay * weight
        if self.momentum > 0:
            v = state["v"]
            v *= self.momentum
            v += grad
            grad = grad + self.momentum * v if self.nesterov else v
        _subtract_scaled(xp, weight, grad, self.lr)


@dataclass(frozen=True)
class Adam:
    """alpha_t = alpha*sqrt(1 - beta2^t)/(1 - beta1^t) at update t (from 1); g = grad +
    weight_decay*w; m = beta1*m + (1-beta1)*g; v = beta2*v + (1-beta2)*g^2;
    w -= alpha_t*m/(sqrt(v) + epsilon)."""

    alpha: float = 0.001
    beta1: float = 0.9
    beta2: float = 0.999
    weight_decay: float = 0.0
    epsilon: float = 1e-8

    def init_state(self, xp, weight) -> dict[str, Any]:
        return {"m": xp.zeros_like(weight), "v": xp.zeros_like(weight)}

    def update(self, xp, weight, grad, state: dict, step: int, skip=None) -> None:
        """`step` counts the updates before this one; bias correction uses step + 1. As SGD's,
        with `skip`."""
        t = step + 1
        aten = vendor.aten(xp)
        if aten is not None:
            self._aten_update(aten, weight, grad, state, t, skip)
            return
        alpha_t = self.alpha * math.sqrt(1 - self.beta2 ** t) / (1 - self.beta1 ** t)
        if self.weight_decay:
            grad = grad + self.weight_decay * weight
        m, v = state["m"], state["v"]
        m *= self.beta1
        m += (1 - self.beta1) * grad
        v *= self.beta2
        v += (1 - self.beta2) * grad * grad
        denominator = xp.sqrt(v)
        denominator += self.epsilon
        xp.divide(m, denominator, out=denominator)
        _subtract_scaled(xp, weight, denominator, alpha_t)

    def _aten_update(self, aten, weight, grad, state: dict, t: int, skip) -> None:
        """torch's fused Adam divides by sqrt(v)/sqrt(1 - beta2^t) + eps where FlexFlow divides
        by sqrt(v) + eps; with eps scaled by 1/sqrt(1 - beta2^t) the two are the same update."""
        weight = aten.tensor(weight)
        # (made on the device by a fill kernel: an upload from the host would wait for the
        # device at every update of every weight)
        steps = [aten.torch.full((), float(t), device=weight.device)]
        aten.torch._fused_adam_([weight], [aten.tensor(grad)],
                                [aten.tensor(state["m"])], [aten.tensor(state["v"])], [],
                                steps, lr=self.alpha, beta1=self.beta1, beta2=self.beta2,
                                weight_decay=self.weight_decay,
                                eps=self.epsilon / math.sqrt(1 - self.beta2 ** t),
                                amsgrad=False, maximize=False, found_inf=skip)


UpdateRule = SGD | Adam


def _subtract_scaled(xp, weight, direction, scale: float) -> None:
    """weight -= scale * direction, in the weight's dtype."""
    weight -= (scale * direction).astype(weight.dtype, copy=False)
