"""FlexFlow's accuracy checks for the examples.

The threshold is in percent: an Enum member (FlexFlow's `ModelAccuracy.MNIST_MLP`, whose value
is 90) or a number. Both read the training accuracy of the last epoch from the epoch logs, so a
validation pass run after the epoch does not replace it.
"""

from __future__ import annotations

from enum import Enum

from .base import Callback


def _threshold(accuracy) -> float:
    return float(accuracy.value if isinstance(accuracy, Enum) else accuracy)


def _percent(logs, who: str) -> float:
    if not logs or "accuracy" not in logs:
        raise ValueError(f"{who} needs the 'accuracy' metric: compile the model with "
                         f"metrics=['accuracy', ...]")
    return 100.0 * logs["accuracy"]


class VerifyMetrics(Callback):
    """Fail (AssertionError) at the end of training if the last epoch's accuracy is below the
    threshold."""

    def __init__(self, accuracy):
        super().__init__()
        self.accuracy = _threshold(accuracy)
        self._last_logs = None

    def on_epoch_end(self, epoch, logs=None):
        self._last_logs = dict(logs or {})

    def on_train_end(self, logs=None):
        accuracy = _percent(self._last_logs, "VerifyMetrics")
        assert accuracy >= self.accuracy, (f"Accuracy is wrong: {accuracy:.2f}% is below the "
                                           f"expected {self.accuracy:g}%")


class EpochVerifyMetrics(Callback):
    """Stop training after an epoch whose accuracy exceeds the threshold (if `early_stop`)."""

    def __init__(self, accuracy, early_stop=True):
        super().__init__()
        self.accuracy = _threshold(accuracy)
        self.early_stop = early_stop

    def on_epoch_end(self, epoch, logs=None):
        return self.early_stop and _percent(logs, "EpochVerifyMetrics") > self.accuracy
