"""LearningRateScheduler: set the optimizer's learning rate at the start of each epoch."""

from __future__ import annotations

import inspect

import numpy as np

from .base import Callback


class LearningRateScheduler(Callback):
    """`schedule(epoch)` or `schedule(epoch, current_lr)` returns the epoch's learning rate (a
    float). Prints FlexFlow's `set learning rate  <lr>` line."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        self.schedule = schedule
        self.verbose = verbose
        try:
            params = inspect.signature(schedule).parameters.values()
            self._takes_lr = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                                 for p in params) >= 2
        except (TypeError, ValueError):  # builtins without a signature
            self._takes_lr = False

    def on_epoch_begin(self, epoch, logs=None):
        optimizer = self.model.optimizer
        if not hasattr(optimizer, "lr"):
            raise ValueError('Optimizer must have a "lr" attribute.')
        lr = self.schedule(epoch, optimizer.lr) if self._takes_lr else self.schedule(epoch)
        if not isinstance(lr, (float, np.float32, np.float64)):
            raise ValueError(f"the output of the schedule function should be a float, got "
                             f"{lr!r} for epoch {epoch}")
        optimizer.set_learning_rate(float(lr))
        print("set learning rate ", float(lr))
