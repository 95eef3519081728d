"""ProgbarLogger: prints `Epoch i/n` and a Progbar for each epoch of fit (verbose=1 draws the bar
on a terminal; verbose=2 writes one plain line per epoch)."""

from __future__ import annotations

from ..utils.progbar import Progbar
from .base import Callback


class ProgbarLogger(Callback):
    batch_logs_only = True

    def __init__(self, verbose: int = 1, stream=None):
        super().__init__()
        self.verbose = verbose
        self.stream = stream

    def on_epoch_begin(self, epoch, logs=None):
        print(f"Epoch {epoch + 1}/{self.params['epochs']}", file=self.stream, flush=True)
        self._sums: dict[str, float] = {}
        self._seen = 0
        self._bar = Progbar(self.params["steps"], self.params["batch_size"], self.stream,
                            interactive=False if self.verbose == 2 else None)

    def on_batch_end(self, batch, logs=None):
        size = logs.get("size", 1)
        self._seen += size
        for key, value in logs.items():
            if key not in ("size", "batch"):
                self._sums[key] = self._sums.get(key, 0.0) + value * size
        self._bar.update(batch + 1, {k: v / self._seen for k, v in self._sums.items()})

    def on_epoch_end(self, epoch, logs=None):
        self._bar.finish(logs or {})
