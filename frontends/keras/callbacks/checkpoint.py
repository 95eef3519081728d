"""ModelCheckpoint: save the training state (or only the weights) after epochs."""

from __future__ import annotations

from .base import Callback
from .monitor import Monitor


class ModelCheckpoint(Callback):
    """Save to `filepath` after every epoch, or only after epochs that improve `monitor`
    (`save_best_only`). `filepath` may hold `{epoch}` and log keys, e.g.
    'ckpt.{epoch:02d}-{val_loss:.2f}'.

    By default the file is what `save_weights` writes (weights only, `.npz` appended when
    missing; loaded by layer order, so into any model of the same layers). With
    `save_weights_only=False` it is a full checkpoint, written to exactly `filepath` by
    `FFModel.save_checkpoint` (format: flexflow/checkpoint.py): weights, optimizer state, the
    counters that seed dropout and Adam, and the number of epochs done, matched by layer name.
    `model.load_weights(path)` restores it, and `model.fit(..., initial_epoch=<that number>)`
    continues with the same losses as a run that never stopped."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=True, mode="auto", save_freq="epoch"):
        super().__init__()
        if save_freq != "epoch":
            raise ValueError(f"ModelCheckpoint: save_freq={save_freq!r} is not supported (only "
                             f"'epoch')")
        self.filepath = str(filepath)
        self.monitor, self.mode, self.verbose = monitor, mode, verbose
        self.save_best_only = save_best_only
        self.save_weights_only = bool(save_weights_only)

    def on_train_begin(self, logs=None):
        self._monitor = Monitor(self.monitor, self.mode, 0, "ModelCheckpoint")
        if self.save_best_only:
            self._monitor.check_available(self.params)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.save_best_only and not self._monitor.improves(self._monitor.value(logs)):
            return
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_weights_only:
            path = self.model.save_weights(path)
        else:
            path = self.model.ffmodel.save_checkpoint(path, epoch=epoch + 1)
        if self.verbose:
            what = "weights" if self.save_weights_only else "checkpoint"
            print(f"Epoch {epoch + 1}: saved the {what} to {path}")
