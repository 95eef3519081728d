"""SGD and Adam with FlexFlow's update rules (reference 2.7). The update runs on the device that
owns each weight (or each box of it); `update` mutates the weight in place."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class SGDOptimizer:
    ffmodel: object = None
    lr: float = 0.01
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0

    def set_learning_rate(self, lr: float) -> None:
        self.lr = float(lr)

    def init_state(self, xp, weight):
        return {"v": xp.zeros_like(weight)} if self.momentum > 0 else {}

    def update(self, xp, weight, grad, state, step: int) -> None:
        if self.weight_decay:
            grad = grad + self.weight_decay * weight
        if self.momentum > 0:
            v = state["v"]
            v *= self.momentum
            v += grad
            grad = grad + self.momentum * v if self.nesterov else v
        weight -= (self.lr * grad).astype(weight.dtype, copy=False)

    def __getstate__(self):  # the model stays on the client
        return {k: v for k, v in self.__dict__.items() if k != "ffmodel"}


@dataclass
class AdamOptimizer:
    ffmodel: object = None
    alpha: float = 0.001
    beta1: float = 0.9
    beta2: float = 0.999
    weight_decay: float = 0.0
    epsilon: float = 1e-8

    def set_learning_rate(self, lr: float) -> None:
        self.alpha = float(lr)

    @property
    def lr(self) -> float:
        return self.alpha

    def init_state(self, xp, weight):
        return {"m": xp.zeros_like(weight), "v": xp.zeros_like(weight)}

    def update(self, xp, weight, grad, state, step: int) -> None:
        """`step` counts updates before this one; bias correction uses step + 1."""
        t = step + 1
        alpha_t = self.alpha * math.sqrt(1 - self.beta2 ** t) / (1 - self.beta1 ** t)
        if self.weight_decay:
            grad = grad + self.weight_decay * weight
        m, v = state["m"], state["v"]
        m *= self.beta1
        m += (1 - self.beta1) * grad
        v *= self.beta2
        v += (1 - self.beta2) * grad * grad
        weight -= (alpha_t * m / (xp.sqrt(v) + self.epsilon)).astype(weight.dtype, copy=False)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "ffmodel"}
