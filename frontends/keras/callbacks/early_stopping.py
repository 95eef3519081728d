"""EarlyStopping: stop when a monitored quantity has stopped improving."""

from __future__ import annotations

from .base import Callback
from .monitor import Monitor


class EarlyStopping(Callback):
    """Stop after `patience` epochs without an improvement of `monitor` by more than
    `min_delta`. `baseline`: stop unless the first epochs beat it. `restore_best_weights`: put the
    weights of the best epoch back when stopping."""

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto",
                 baseline=None, restore_best_weights=False):
        super().__init__()
        self.monitor, self.mode, self.min_delta = monitor, mode, min_delta
        self.patience, self.verbose = int(patience), verbose
        self.baseline, self.restore_best_weights = baseline, restore_best_weights
        self.stopped_epoch = 0

    def on_train_begin(self, logs=None):
        self._monitor = Monitor(self.monitor, self.mode, self.min_delta, "EarlyStopping")
        self._monitor.check_available(self.params)
        if self.baseline is not None:
            self._monitor.best = float(self.baseline)
        self.wait = 0
        self.stopped_epoch = 0
        self.best_weights = None

    def on_epoch_end(self, epoch, logs=None):
        if self._monitor.improves(self._monitor.value(logs)):
            self.wait = 0
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            return
        self.wait += 1
        if self.wait <= self.patience:
            return
        self.stopped_epoch = epoch
        if self.restore_best_weights and self.best_weights is not None:
            self.model.set_weights(self.best_weights)
        self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch and self.verbose:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
