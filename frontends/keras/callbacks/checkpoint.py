"""ModelCheckpoint: save the weights after epochs (see BaseModel.save_weights for the format)."""

from __future__ import annotations

from .base import Callback
from .monitor import Monitor


class ModelCheckpoint(Callback):
    """Save the weights to `filepath` after every epoch, or only after epochs that improve
    `monitor` (`save_best_only`). `filepath` may hold `{epoch}` and log keys, e.g.
    'weights.{epoch:02d}-{val_loss:.2f}.npz'. Only weights can be saved (there is no model file
    format), so `save_weights_only` is True here and False is refused."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=True, mode="auto", save_freq="epoch"):
        super().__init__()
        if not save_weights_only:
            raise ValueError("ModelCheckpoint: only weights can be saved; use "
                             "save_weights_only=True")
        if save_freq != "epoch":
            raise ValueError(f"ModelCheckpoint: save_freq={save_freq!r} is not supported (only "
                             f"'epoch')")
        self.filepath = str(filepath)
        self.monitor, self.mode, self.verbose = monitor, mode, verbose
        self.save_best_only = save_best_only

    def on_train_begin(self, logs=None):
        self._monitor = Monitor(self.monitor, self.mode, 0, "ModelCheckpoint")
        if self.save_best_only:
            self._monitor.check_available(self.params)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.save_best_only and not self._monitor.improves(self._monitor.value(logs)):
            return
        path = self.filepath.format(epoch=epoch + 1, **logs)
        self.model.save_weights(path)
        if self.verbose:
            print(f"Epoch {epoch + 1}: saved the weights to {path}")
