"""Loss gradients and per-batch metric sums, written against `xp` so they run on the device that
holds each piece of the model output.

Semantics are FlexFlow's (reference 2.9): cross-entropy losses take probabilities; the gradient is
scaled by 1/global batch, so summing replicas' weight gradients gives the mean. Where FlexFlow's
softmax passes gradients straight through, we keep a real softmax backward and instead let the
loss produce the gradient w.r.t. the softmax's input when a softmax is the last layer (`p - y`,
exact and numerically stable); with any other last layer the true gradient w.r.t. the
probabilities is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from .type import LossType, MetricsType

EPS = 1e-8
SPARSE_LOSSES = (LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,)


@dataclass(frozen=True)
class LossFunction:
    loss_type: LossType
    metrics: tuple[MetricsType, ...]
    batch_size: int       # global batch
    sample_size: int      # elements per sample of the model output
    through_softmax: bool

    @property
    def sparse(self) -> bool:
        return self.loss_type in SPARSE_LOSSES

    def __call__(self, xp, out, label):
        target = _one_hot(xp, label, out.shape[-1]) if self.sparse else label
        return self.gradient(xp, out, target), self.sums(xp, out, label, target)

    def gradient(self, xp, out, target):
        kind = self.loss_type
        if kind in (LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    LossType.LOSS_CATEGORICAL_CROSSENTROPY):
            if self.through_softmax:
                return ((out - target) / self.batch_size).astype(out.dtype, copy=False)
            return (-target / xp.maximum(out, EPS) / self.batch_size).astype(out.dtype, copy=False)
        if kind == LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE:
            scale = 2.0 / (self.batch_size * self.sample_size)
            return ((out - target) * scale).astype(out.dtype, copy=False)
        if kind == LossType.LOSS_MEAN_SQUARED_ERROR_SUM_REDUCE:
            return ((out - target) * 2.0).astype(out.dtype, copy=False)
        if kind == LossType.LOSS_IDENTITY:
            return xp.full(out.shape, 1.0 / (self.batch_size * self.sample_size), out.dtype)
        raise ValueError(f"unsupported loss {kind}")

    def sums(self, xp, out, label, target) -> dict[str, float]:
        """Per-batch sums over this piece's samples; PerfMetrics divides by the sample count."""
        samples = out.shape[0]
        flat_out = out.reshape(samples, -1)
        flat_target = target.reshape(samples, -1)
        sq = ((flat_out - flat_target) ** 2).mean(axis=1)
        ce = -(flat_target * xp.log(xp.maximum(flat_out, EPS))).sum(axis=1)
        sums = {"samples": samples, "loss": float(self._loss_sum(ce, sq))}
        for metric in self.metrics:
            if metric == MetricsType.METRICS_ACCURACY:
                predicted = out.reshape(samples, -1).argmax(axis=1)
                truth = (label.reshape(samples) if self.sparse
                         else (flat_target > 0.9).argmax(axis=1))
                sums["correct"] = int((predicted == truth).sum())
            elif metric == MetricsType.METRICS_CATEGORICAL_CROSSENTROPY:
                sums["categorical_crossentropy"] = float(ce.sum())
            elif metric == MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY:
                sums["sparse_categorical_crossentropy"] = float(ce.sum())
            elif metric == MetricsType.METRICS_MEAN_SQUARED_ERROR:
                sums["mean_squared_error"] = float(sq.sum())
            elif metric == MetricsType.METRICS_ROOT_MEAN_SQUARED_ERROR:
                sums["root_mean_squared_error"] = float(xp.sqrt(sq).sum())
            elif metric == MetricsType.METRICS_MEAN_ABSOLUTE_ERROR:
                sums["mean_absolute_error"] = float(xp.abs(flat_out - flat_target).mean(
                    axis=1).sum())
        return sums

    def _loss_sum(self, ce, sq):
        if self.loss_type in (LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                              LossType.LOSS_CATEGORICAL_CROSSENTROPY):
            return ce.sum()
        if self.loss_type == LossType.LOSS_MEAN_SQUARED_ERROR_SUM_REDUCE:
            return sq.sum() * self.sample_size
        return sq.sum()


def _one_hot(xp, label, classes: int):
    flat = label.reshape(-1).astype("int64")
    if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= classes):
        raise ValueError(f"labels must lie in [0, {classes}), got values from {int(flat.min())} "
                         f"to {int(flat.max())}")
    target = xp.zeros((flat.shape[0], classes), "float32")
    target[xp.arange(flat.shape[0]), flat] = 1.0
    return target
