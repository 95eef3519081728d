"""Keras metrics, each naming the FlexFlow `MetricsType` it compiles to and the key under which
fit/evaluate report it."""

from __future__ import annotations

from flexflow.core import MetricsType

from .identifiers import resolve


class Metric:
    """Keras's other constructor arguments (from_logits, label_smoothing, axis) are accepted by
    keyword and ignored: FlexFlow's metric of each kind has one definition."""

    metrics_type: MetricsType = None
    default_name: str = ""

    def __init__(self, name: str | None = None, dtype=None, **kwargs):
        self.name = name or self.default_name
        self.dtype = dtype

    @property
    def type(self) -> MetricsType:
        return self.metrics_type


class Accuracy(Metric):
    """Fraction of samples whose largest output is the label's class."""

    metrics_type = MetricsType.METRICS_ACCURACY
    default_name = "accuracy"


class CategoricalCrossentropy(Metric):
    metrics_type = MetricsType.METRICS_CATEGORICAL_CROSSENTROPY
    default_name = "categorical_crossentropy"


class SparseCategoricalCrossentropy(Metric):
    metrics_type = MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY
    default_name = "sparse_categorical_crossentropy"


class MeanSquaredError(Metric):
    metrics_type = MetricsType.METRICS_MEAN_SQUARED_ERROR
    default_name = "mean_squared_error"


class RootMeanSquaredError(Metric):
    metrics_type = MetricsType.METRICS_ROOT_MEAN_SQUARED_ERROR
    default_name = "root_mean_squared_error"


class MeanAbsoluteError(Metric):
    metrics_type = MetricsType.METRICS_MEAN_ABSOLUTE_ERROR
    default_name = "mean_absolute_error"


_BY_NAME = {cls.default_name: cls for cls in (
    Accuracy, CategoricalCrossentropy, SparseCategoricalCrossentropy, MeanSquaredError,
    RootMeanSquaredError, MeanAbsoluteError)}
_BY_NAME.update({"acc": Accuracy, "mse": MeanSquaredError, "mae": MeanAbsoluteError})


def get(identifier) -> Metric:
    """A Metric from an instance or one of the names in `_BY_NAME`."""
    return resolve(identifier, Metric, _BY_NAME, "unsupported metric")
