"""SGD and Adam with FlexFlow's constructors (reference 2.7). They hold the hyper-parameters a
script sets and changes; `rule()` is the update kernel the devices run (ops/optimizers.py), made
afresh for every iteration so that a new learning rate takes effect at the next update.

A learning rate that is negative or not a finite number is refused (`ValueError`) where it is
given, at construction or by `set_learning_rate`, before any update uses it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .ops.optimizers import SGD, Adam


def checked_learning_rate(value, who: str) -> float:
    """`value` as a float; a ValueError naming `who` unless it is a finite number >= 0."""
    try:
        rate = math.nan if isinstance(value, (bool, str)) else float(value)
    except (TypeError, ValueError, OverflowError):
        rate = math.nan
    if not (math.isfinite(rate) and rate >= 0):
        raise ValueError(f"{who}: the learning rate must be a finite number >= 0, got {value!r}")
    return rate


@dataclass
class SGDOptimizer:
    ffmodel: object = None
    lr: float = 0.01
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0

    def __post_init__(self):
        checked_learning_rate(self.lr, "SGDOptimizer lr")

    def set_learning_rate(self, lr: float) -> None:
        self.lr = checked_learning_rate(lr, "SGDOptimizer.set_learning_rate")

    def rule(self) -> SGD:
        return SGD(lr=self.lr, momentum=self.momentum, nesterov=self.nesterov,
                   weight_decay=self.weight_decay)

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

    def __post_init__(self):
        checked_learning_rate(self.alpha, "AdamOptimizer alpha")

    def set_learning_rate(self, lr: float) -> None:
        self.alpha = checked_learning_rate(lr, "AdamOptimizer.set_learning_rate")

    @property
    def lr(self) -> float:
        return self.alpha

    def rule(self) -> Adam:
        return Adam(alpha=self.alpha, beta1=self.beta1, beta2=self.beta2,
                    weight_decay=self.weight_decay, epsilon=self.epsilon)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "ffmodel"}
