"""Loss gradients and per-batch metric sums as a kernel: a frozen value run on the device that
holds each piece of the model output (the executor's `Loss` action calls it).

Semantics are FlexFlow's (reference 2.9): cross-entropy losses take probabilities; the gradient is
scaled by 1/global batch, so summing replicas' weight gradients gives the mean. Where FlexFlow's
softmax passes gradients straight through, we keep a real softmax backward and instead let the
loss produce the gradient w.r.t. the softmax's input when a softmax is the last layer (`p - y`,
exact and numerically stable); with any other last layer the true gradient w.r.t. the
probabilities is used.

A sparse label is never expanded to a one-hot matrix unless a metric compares against one (the
squared and absolute errors): the gradient is one scaled copy of the output with the label's
entries corrected in place, and the cross-entropy reads only the label's probabilities.
`flexflow/losses.py` maps FlexFlow's LossType and MetricsType onto the names used here.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import vendor

EPS = 1e-8
CROSS_ENTROPIES = ("categorical_crossentropy", "sparse_categorical_crossentropy")
LOSSES = CROSS_ENTROPIES + ("mean_squared_error_avg_reduce", "mean_squared_error_sum_reduce",
                            "identity")
METRICS = ("accuracy", "categorical_crossentropy", "sparse_categorical_crossentropy",
           "mean_squared_error", "root_mean_squared_error", "mean_absolute_error")


@dataclass(frozen=True)
class Loss:
    kind: str                    # one of LOSSES
    metrics: tuple[str, ...]     # of METRICS
    batch_size: int              # global batch
    sample_size: int             # elements per sample of the model output
    through_softmax: bool

    def __post_init__(self):
        if self.kind not in LOSSES:
            raise ValueError(f"unknown loss {self.kind!r}; expected one of {LOSSES}")
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown:
            raise ValueError(f"unknown metrics {unknown}; expected some of {METRICS}")

    @property
    def sparse(self) -> bool:
        return self.kind == "sparse_categorical_crossentropy"

    def __call__(self, xp, out, label):
        """(gradient w.r.t. `out`, or the softmax's input; the metric sums of this piece). A
        sparse label of an output of more than two dims labels each position (the label's
        shape is the output's with a last dim of 1): each position is a sample of the last
        dim's classes, and the gradient is still scaled by 1/global batch (FlexFlow's)."""
        shape = out.shape
        if self.sparse and out.ndim > 2:
            out, label = out.reshape(-1, shape[-1]), label.reshape(-1, 1)
        target = _Target(xp, out, label, self.sparse)
        return self.gradient(xp, out, target).reshape(shape), self.sums(xp, out, target)

    def gradient(self, xp, out, target: "_Target"):
        scale = 1.0 / self.batch_size
        if self.kind in CROSS_ENTROPIES:
            if not self.through_softmax:
                return target.scaled_by(-scale / xp.maximum(out, EPS))
            grad = xp.multiply(out, out.dtype.type(scale))
            target.subtract(grad, scale)
            return grad
        if self.kind == "identity":
            return xp.full(out.shape, scale / self.sample_size, out.dtype)
        factor = 2.0 / self.sample_size * scale if self.kind.endswith("avg_reduce") else 2.0
        grad = out - target.dense()
        grad *= out.dtype.type(factor)
        return grad

    def sums(self, xp, out, target: "_Target") -> dict[str, float]:
        """Per-batch sums over this piece's samples; PerfMetrics divides by the sample count."""
        samples = out.shape[0]
        measures = _Measures(xp, out, target)
        if self.kind in CROSS_ENTROPIES:
            loss = measures.cross_entropy().sum()
        elif self.kind == "mean_squared_error_sum_reduce":
            loss = measures.squared_error().sum() * self.sample_size
        else:
            loss = measures.squared_error().sum()
        number = _host_number if vendor.holds_host_arrays(xp) else _kept
        sums = {"samples": samples, "loss": number(float, loss)}
        for metric in self.metrics:
            if metric == "accuracy":
                sums["correct"] = number(int, (out.reshape(samples, -1).argmax(axis=1)
                                               == target.classes()).sum())
            elif metric in CROSS_ENTROPIES:
                sums[metric] = number(float, measures.cross_entropy().sum())
            elif metric == "mean_squared_error":
                sums[metric] = number(float, measures.squared_error().sum())
            elif metric == "root_mean_squared_error":
                sums[metric] = number(float, xp.sqrt(measures.squared_error()).sum())
            else:
                sums[metric] = number(float, xp.abs(measures.flat_out - target.dense().reshape(
                    samples, -1)).mean(axis=1).sum())
        return sums


def _host_number(kind, value):
    return kind(value)


def _kept(kind, value):
    """A device's value as it is: the host reads the iteration's values at once at its end."""
    return value


class _Target:
    """The label of a piece of output: class indices (sparse) or a dense target."""

    def __init__(self, xp, out, label, sparse: bool):
        self.xp, self.shape = xp, out.shape
        self.label = label
        # (labels are always fed: on a device, Load checked them on the host: fed_checks.py)
        self.indices = (_class_indices(label, out.shape[-1], vendor.holds_host_arrays(xp))
                        if sparse else None)
        # (sample, label) index pairs of a sparse target's nonzero entries
        self.at = (xp.arange(out.shape[0]), self.indices) if sparse else None
        self._dense = None

    def dense(self):
        """The target as an array of the output's shape (a one-hot matrix for sparse labels)."""
        if self._dense is None:
            if self.indices is None:
                self._dense = self.label
            else:
                self._dense = self.xp.zeros(self.shape, "float32")
                self._dense[self.at] = 1.0
        return self._dense

    def picked(self, values):
        """values[i, label_i] for sparse labels."""
        return values[self.at]

    def scaled_by(self, factors):
        """target * factors, computed only where a sparse target is not zero."""
        if self.indices is None:
            return (self.label * factors).astype("float32", copy=False)
        grad = self.xp.zeros(self.shape, "float32")
        grad[self.at] = self.picked(factors)
        return grad

    def subtract(self, grad, scale: float) -> None:
        """grad -= scale * target, in place."""
        if self.indices is None:
            grad -= (scale * self.label).astype(grad.dtype, copy=False)
        else:
            grad[self.at] -= grad.dtype.type(scale)

    def classes(self):
        """Each sample's class: the label, or where a dense target exceeds 0.9."""
        if self.indices is not None:
            return self.indices
        return (self.label.reshape(self.shape[0], -1) > 0.9).argmax(axis=1)


class _Measures:
    """Per-sample cross-entropy and squared error, each computed once when first asked for."""

    def __init__(self, xp, out, target: _Target):
        self.xp, self.out, self.target = xp, out, target
        self.flat_out = out.reshape(out.shape[0], -1)
        self._ce = self._sq = None

    def cross_entropy(self):
        if self._ce is None:
            xp, target = self.xp, self.target
            if target.indices is not None:
                self._ce = -xp.log(xp.maximum(target.picked(self.out), EPS))
            else:
                self._ce = -(target.label.reshape(self.flat_out.shape)
                             * xp.log(xp.maximum(self.flat_out, EPS))).sum(axis=1)
        return self._ce

    def squared_error(self):
        if self._sq is None:
            flat_target = self.target.dense().reshape(self.flat_out.shape)
            self._sq = ((self.flat_out - flat_target) ** 2).mean(axis=1)
        return self._sq


def _class_indices(label, classes: int, check: bool):
    flat = label.reshape(-1)
    if flat.dtype.kind not in "iu":
        flat = flat.astype("int64")
    if check:
        check_labels(flat, classes)
    return flat


def check_labels(label, classes: int) -> None:
    """Refuse class labels outside [0, classes)."""
    flat = label.reshape(-1)
    if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= classes):
        raise ValueError(f"labels must lie in [0, {classes}), got values from {int(flat.min())} "
                         f"to {int(flat.max())}")
