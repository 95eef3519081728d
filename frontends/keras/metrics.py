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


def _metric(class_name: str, metrics_type: MetricsType, default_name: str) -> type[Metric]:
    return type(class_name, (Metric,), {"metrics_type": metrics_type,
                                        "default_name": default_name, "__module__": __name__})


# Accuracy: the fraction of samples whose largest output is the label's class.
Accuracy = _metric("Accuracy", MetricsType.METRICS_ACCURACY, "accuracy")
CategoricalCrossentropy = _metric("CategoricalCrossentropy",
                                  MetricsType.METRICS_CATEGORICAL_CROSSENTROPY,
                                  "categorical_crossentropy")
SparseCategoricalCrossentropy = _metric("SparseCategoricalCrossentropy",
                                        MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY,
                                        "sparse_categorical_crossentropy")
MeanSquaredError = _metric("MeanSquaredError", MetricsType.METRICS_MEAN_SQUARED_ERROR,
                           "mean_squared_error")
RootMeanSquaredError = _metric("RootMeanSquaredError",
                               MetricsType.METRICS_ROOT_MEAN_SQUARED_ERROR,
                               "root_mean_squared_error")
MeanAbsoluteError = _metric("MeanAbsoluteError", MetricsType.METRICS_MEAN_ABSOLUTE_ERROR,
                            "mean_absolute_error")


_BY_NAME = {cls.default_name: cls for cls in (
    Accuracy, CategoricalCrossentropy, SparseCategoricalCrossentropy, MeanSquaredError,
    RootMeanSquaredError, MeanAbsoluteError)}
_BY_NAME.update({"acc": Accuracy, "mse": MeanSquaredError, "mae": MeanAbsoluteError})


def get(identifier) -> Metric:
    """A Metric from an instance or one of the names in `_BY_NAME`."""
    return resolve(identifier, Metric, _BY_NAME, "unsupported metric")
