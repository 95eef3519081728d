"""History: the epoch logs of a fit, returned by `fit`."""

from __future__ import annotations

from .base import Callback


class History(Callback):
    """`history[key]` lists the value of `key` ('loss', 'accuracy', 'val_loss', ...) per epoch;
    `epoch` lists the epoch numbers."""

    def on_train_begin(self, logs=None):
        self.epoch: list[int] = []
        self.history: dict[str, list[float]] = {}

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(value)
