"""The quantity EarlyStopping and ModelCheckpoint watch, and what counts as an improvement."""

from __future__ import annotations

import math


class Monitor:
    def __init__(self, monitor: str, mode: str, min_delta: float, who: str):
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"{who}: mode must be 'auto', 'min' or 'max', got {mode!r}")
        self.key = monitor
        self.who = who
        self.maximize = mode == "max" or (mode == "auto" and "acc" in monitor)
        self.min_delta = abs(float(min_delta))
        self.best = -math.inf if self.maximize else math.inf

    def check_available(self, params: dict) -> None:
        """Fail before training if fit will never report the monitored quantity."""
        keys = params.get("metrics")
        if keys is not None and self.key not in keys:
            raise ValueError(f"{self.who} monitors {self.key!r}, which fit does not report; "
                             f"available: {keys} (val_* need validation_data or "
                             f"validation_split)")

    def value(self, logs) -> float:
        if not logs or self.key not in logs:
            raise ValueError(f"{self.who}: {self.key!r} is not in the epoch logs "
                             f"{sorted(logs or {})}")
        return float(logs[self.key])

    def improves(self, value: float) -> bool:
        """Whether `value` beats the best so far by more than min_delta (and, if so, record it)."""
        if self.maximize:
            better = value - self.min_delta > self.best
        else:
            better = value + self.min_delta < self.best
        if better:
            self.best = value
        return better
