"""PerfMetrics: metric sums accumulated since the last `reset_metrics`, and FlexFlow's printed
`[Metrics] ...` line."""

from __future__ import annotations

import sys
from typing import Iterable

from .type import MetricsType

METRIC_ORDER = (  # FlexFlow prints fields in this order
    (MetricsType.METRICS_CATEGORICAL_CROSSENTROPY, "categorical_crossentropy"),
    (MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY, "sparse_categorical_crossentropy"),
    (MetricsType.METRICS_MEAN_SQUARED_ERROR, "mean_squared_error"),
    (MetricsType.METRICS_ROOT_MEAN_SQUARED_ERROR, "root_mean_squared_error"),
    (MetricsType.METRICS_MEAN_ABSOLUTE_ERROR, "mean_absolute_error"),
)


class PerfMetrics:
    def __init__(self, metrics: Iterable[MetricsType] = ()):
        self.metrics = tuple(metrics)
        self.peak_memory: list[int | None] | None = None  # (ours) under --profiling
        self.reset()

    def reset(self) -> None:
        self.sums: dict[str, float] = {}
        self.last_batch: dict[str, float] = {}

    def add(self, pieces: Iterable[dict[str, float]]) -> None:
        batch: dict[str, float] = {}
        for piece in pieces:
            for name, value in piece.items():
                batch[name] = batch.get(name, 0) + value
        self.last_batch = batch
        for name, value in batch.items():
            self.sums[name] = self.sums.get(name, 0) + value

    @property
    def train_all(self) -> int:
        return int(self.sums.get("samples", 0))

    @property
    def train_correct(self) -> int:
        return int(self.sums.get("correct", 0))

    def get_accuracy(self) -> float:
        """Percent correct since the last reset (0 before any batch)."""
        return self.train_correct * 100.0 / self.train_all if self.train_all else 0.0

    def mean(self, name: str) -> float:
        return self.sums.get(name, 0.0) / self.train_all if self.train_all else 0.0

    @property
    def last_loss(self) -> float:
        """Mean training loss of the most recent batch."""
        samples = self.last_batch.get("samples", 0)
        return self.last_batch.get("loss", 0.0) / samples if samples else float("nan")

    def line(self) -> str:
        parts = ["[Metrics]"]
        if MetricsType.METRICS_ACCURACY in self.metrics:
            parts.append(f"accuracy: {self.get_accuracy():.6f}% "
                         f"({self.train_correct} / {self.train_all})")
        for metric, name in METRIC_ORDER:
            if metric in self.metrics:
                parts.append(f"{name}: {self.mean(name):.6f}")
        return " ".join(parts)

    def print(self, stream=None) -> None:
        print(self.line(), file=stream or sys.stderr)
