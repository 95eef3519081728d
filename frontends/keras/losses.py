"""Keras losses, each naming the FlexFlow `LossType` it compiles to.

The cross-entropy losses take probabilities (the model ends in a softmax), as FlexFlow's do;
`from_logits=True` is refused rather than silently ignored.
"""

from __future__ import annotations

from flexflow.core import LossType

from .identifiers import resolve


class Loss:
    loss_type: LossType = None

    def __init__(self, reduction: str = "auto", name: str | None = None):
        if reduction not in ("auto", "sum_over_batch_size"):
            raise ValueError(f"{type(self).__name__}: reduction {reduction!r} is not supported "
                             f"(the loss is the mean over the batch)")
        self.name = name

    @property
    def type(self) -> LossType:
        return self.loss_type


class CategoricalCrossentropy(Loss):
    """Labels are one-hot float32 rows, shaped like the model output."""

    loss_type = LossType.LOSS_CATEGORICAL_CROSSENTROPY

    def __init__(self, from_logits=False, label_smoothing=0, reduction="auto",
                 name="categorical_crossentropy"):
        super().__init__(reduction, name)
        _refuse_logits_and_smoothing(type(self).__name__, from_logits, label_smoothing)


class SparseCategoricalCrossentropy(Loss):
    """Labels are int32 class indices of shape (N, 1)."""

    loss_type = LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY

    def __init__(self, from_logits=False, reduction="auto",
                 name="sparse_categorical_crossentropy"):
        super().__init__(reduction, name)
        _refuse_logits_and_smoothing(type(self).__name__, from_logits, 0)


class MeanSquaredError(Loss):
    loss_type = LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE

    def __init__(self, reduction="auto", name="mean_squared_error"):
        super().__init__(reduction, name)


class Identity(Loss):
    """The model output is the loss (FlexFlow's LOSS_IDENTITY); labels are ignored."""

    loss_type = LossType.LOSS_IDENTITY

    def __init__(self, reduction="auto", name="identity"):
        super().__init__(reduction, name)


def _refuse_logits_and_smoothing(what: str, from_logits, label_smoothing) -> None:
    if from_logits:
        raise ValueError(f"{what}(from_logits=True) is not supported: end the model with a "
                         f"softmax and keep from_logits=False")
    if label_smoothing:
        raise ValueError(f"{what}: label_smoothing is not supported")


_BY_NAME = {"categorical_crossentropy": CategoricalCrossentropy,
            "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
            "mean_squared_error": MeanSquaredError, "mse": MeanSquaredError,
            "identity": Identity}


def get(identifier) -> Loss:
    """A Loss from an instance or one of the names in `_BY_NAME`."""
    return resolve(identifier, Loss, _BY_NAME, "unsupported loss")
