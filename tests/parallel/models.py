"""The models the strategy tests train, built with the FFModel API, and the strategies they are
trained under."""

from __future__ import annotations

import numpy as np

from flexflow.core import ActiMode, AggrMode, DataType, PoolType
from flexflow.ops.spec import DimKind
from flexflow.scheduler.strategy import ParallelConfig

BATCH = 8
CLASSES = 4
VOCABULARY = 20  # embedding_bag's tokens; each class draws from its own share of them


def classify(ff, features, inputs: list) -> list:
    """Ends a model in a dense softmax over CLASSES; returns its `inputs`."""
    ff.softmax(ff.dense(features, CLASSES))
    return inputs


def conv_batch_norm(ff, t, channels: int, relu: bool = True):
    """A 3x3 convolution keeping the size, then a batch norm (with its ReLU, or without)."""
    return ff.batch_norm(ff.conv2d(t, channels, 3, 3, 1, 1, 1, 1), relu)


def mlp(ff):
    x = ff.create_tensor([BATCH, 12], DataType.DT_FLOAT)
    t = ff.dense(x, 16, ActiMode.AC_MODE_RELU)
    t = ff.dense(t, 8)
    t = ff.relu(t)
    return classify(ff, t, [x])


def cnn_batch_norm(ff):
    x = ff.create_tensor([BATCH, 3, 8, 8], DataType.DT_FLOAT)
    t = ff.pool2d(conv_batch_norm(ff, x, 4), 2, 2, 2, 2, 0, 0)
    t = ff.flat(conv_batch_norm(ff, t, 8, relu=False))
    return classify(ff, t, [x])


def concat_cnn(ff):
    x = ff.create_tensor([BATCH, 3, 8, 8], DataType.DT_FLOAT)
    a = ff.conv2d(x, 4, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    b = ff.conv2d(x, 4, 1, 1, 1, 1, 0, 0, ActiMode.AC_MODE_RELU)
    t = ff.concat([a, b], 1)
    t = ff.conv2d(t, 8, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ff.pool2d(t, 2, 2, 2, 2, 0, 0, PoolType.POOL_MAX)
    t = ff.flat(t)
    return classify(ff, t, [x])


def residual_block(ff):
    x = ff.create_tensor([BATCH, 4, 8, 8], DataType.DT_FLOAT)
    t = conv_batch_norm(ff, conv_batch_norm(ff, x, 4), 4, relu=False)
    t = ff.relu(ff.add(t, x))
    t = ff.pool2d(t, 2, 2, 2, 2, 0, 0, PoolType.POOL_AVG)
    t = ff.flat(t)
    return classify(ff, t, [x])


def transformer_block(ff):
    x = ff.create_tensor([BATCH, 4, 8], DataType.DT_FLOAT)
    t = ff.multihead_attention(x, x, x, 8, 2)
    t = ff.layer_norm(ff.add(t, x), [-1])
    f = ff.dense(t, 16, ActiMode.AC_MODE_GELU)
    f = ff.dense(f, 8)
    t = ff.layer_norm(ff.add(f, t), [-1])
    t = ff.mean(t, [1])
    return classify(ff, t, [x])


def embedding_bag(ff):
    x = ff.create_tensor([BATCH, 5], DataType.DT_INT32)
    t = ff.embedding(x, VOCABULARY, 8, AggrMode.AGGR_MODE_SUM)
    return classify(ff, t, [x])


def wide_mlp(ff):
    """A 1024 x 1024 dense kernel (4 MiB): on 2 or 4 devices every shard of it is at least
    actions.EARLY_SEND_BYTES, so its gradient pieces and new values are posted early."""
    x = ff.create_tensor([BATCH, 1024], DataType.DT_FLOAT)
    return classify(ff, ff.dense(x, 1024, ActiMode.AC_MODE_RELU), [x])


MODELS = {"mlp": mlp, "cnn_batch_norm": cnn_batch_norm, "concat_cnn": concat_cnn,
          "residual_block": residual_block, "transformer_block": transformer_block,
          "embedding_bag": embedding_bag}


def batches(inputs, steps: int, seed: int = 0):
    """Deterministic batches for `inputs` (a list of Tensors) and labels, one tuple per step.
    Every step draws fresh samples, each from its label's class, so that there is something to
    learn and a model that trains has a falling loss (random labels would leave it nothing but
    noise to fit)."""
    rng = np.random.default_rng(seed)
    templates = [rng.standard_normal((CLASSES, *t.dims[1:])).astype(np.float32) for t in inputs]
    out = []
    for _ in range(steps):
        labels = rng.integers(0, CLASSES, BATCH)
        xs = [_class_samples(t, template, labels, rng) for t, template in zip(inputs, templates)]
        out.append((xs, labels.reshape(BATCH, 1).astype(np.int32)))
    return out


def train_losses(ff, inputs, steps: int) -> list[float]:
    """The losses of `steps` training steps of `ff` on `batches(inputs, steps)`."""
    losses = []
    for xs, y in batches(inputs, steps):
        for tensor, array in zip(inputs, xs):
            tensor.set_tensor(ff, array)
        ff.label_tensor.set_tensor(ff, y)
        losses.append(ff.train_step())
    return losses


def _class_samples(tensor, template, labels, rng):
    """A batch for input `tensor`, each sample from its label's class: a float sample is the
    class's fixed random template plus unit noise, a token sample draws from the class's own
    share of the vocabulary."""
    if tensor.data_type == DataType.DT_INT32:
        share = VOCABULARY // CLASSES
        first = labels.reshape(-1, *[1] * (len(tensor.dims) - 1)) * share
        return (first + rng.integers(0, share, tensor.dims)).astype(np.int32)
    return template[labels] + rng.standard_normal(tensor.dims).astype(np.float32)


# ---- strategies ---------------------------------------------------------------------------------
class SplitError(ValueError):
    """A strategy kind that does not fit a model: a case run under it would not test what its
    name says."""


def _split(kinds, shape, n, wanted, layer) -> tuple[int, ...] | None:
    """Degrees splitting the first dim of kind `wanted` that n divides; None where the layer has
    no dim of that kind at all; SplitError where it has some but n divides none of them."""
    dims = [dim for dim, kind in enumerate(kinds) if kind == wanted and dim > 0]
    for dim in dims:
        if shape[dim] % n == 0:
            degrees = [1] * len(shape)
            degrees[dim] = n
            return tuple(degrees)
    if dims:
        raise SplitError(f"layer {layer.name} has {wanted.value} dims of sizes "
                         f"{[shape[dim] for dim in dims]}, none of which {n} divides")
    return None


def _sample(shape, n):
    return (n,) + (1,) * (len(shape) - 1)


def _kind_degrees(kind: str, layer, graph, n: int) -> tuple[int, ...]:
    """The degrees of a `kind` split ("sample", "parameter", "attribute", "mixed") of `layer`.
    A layer with no dim of the kind's split (a Flat has neither a PARAMETER nor an ATTRIBUTE dim,
    an attention output no PARAMETER dim) stays data parallel: the kind is about the layers that
    have one, and a model with none is no case for it (NO_SPLIT)."""
    shape = graph.tensors[layer.outputs[0]].spec.shape
    kinds = layer.op.dim_kinds(graph.in_specs(layer))
    degrees = None
    if kind == "parameter":
        degrees = _split(kinds, shape, n, DimKind.PARAMETER, layer)
    elif kind == "attribute":
        degrees = _split(kinds, shape, n, DimKind.ATTRIBUTE, layer)
    elif kind == "mixed":  # 2-way sample by n/2-way parameter: on 2 devices, a sample split
        half = _split(kinds, shape, n // 2, DimKind.PARAMETER, layer)
        degrees = None if half is None else (2,) + half[1:]
    return degrees or _sample(shape, n)


def layer_config(kind: str, layer, graph, n: int, index: int, last: bool) -> ParallelConfig:
    shape = graph.tensors[layer.outputs[0]].spec.shape
    devices = list(range(n))
    if last:
        return ParallelConfig(_sample(shape, n), tuple(devices))
    if kind == "placement":
        return ParallelConfig((1,) * len(shape), (index % n,))
    if kind == "reshard":
        cycle = ["sample", "parameter", "attribute", "placement", "mixed"]
        config = layer_config(cycle[index % len(cycle)], layer, graph, n, index, last)
        rotation = index % n
        return ParallelConfig(config.degrees, tuple((d + rotation) % n for d in config.devices))
    degrees = _kind_degrees(kind, layer, graph, n)
    parts = int(np.prod(degrees))
    return ParallelConfig(degrees, tuple(devices[:parts]))


STRATEGY_KINDS = ("sample", "parameter", "attribute", "mixed", "placement", "reshard")
DEVICE_COUNTS = (2, 4)


def _configs(kind: str, graph, n: int) -> dict:
    return {layer.name: layer_config(kind, layer, graph, n, i, i == len(graph.layers) - 1)
            for i, layer in enumerate(graph.layers)}


def strategy(kind: str, graph, n: int, model: str = "the model") -> dict:
    """Each layer's config under `kind` on n devices (the last layer is always data parallel).
    SplitError, naming `model`, where a layer that has a dim of the kind's split cannot be split
    n ways, or where the strategy is data parallelism on every layer (a "parameter" case that
    split nothing would test data parallelism again under another name)."""
    if kind not in STRATEGY_KINDS:
        raise ValueError(f"unknown strategy kind {kind!r}; expected one of {STRATEGY_KINDS}")
    try:
        configs = _configs(kind, graph, n)
    except SplitError as error:
        raise SplitError(f"{model}, {kind} on {n} devices: {error}") from None
    if kind != "sample" and configs == _configs("sample", graph, n):
        raise SplitError(f"{model}, {kind} on {n} devices: splits no layer other than "
                         "data parallelism does")
    return configs


# (model, kind, n) left out of the strategy tests, and why: under them every layer would be
# data parallel, so their tests would repeat the "sample" ones under another name
NO_SPLIT = {
    **{(name, "mixed", 2): "mixed is 2-way sample by n/2-way parameter: on 2 devices, sample"
       for name in MODELS},
    **{("embedding_bag", "attribute", n): "only its softmax has an ATTRIBUTE dim, and the last "
       "layer is always data parallel" for n in DEVICE_COUNTS},
}

# every other (model, kind, n): under each, some layer is split as its kind says
CASES = [(name, kind, n) for name in MODELS for kind in STRATEGY_KINDS for n in DEVICE_COUNTS
         if (name, kind, n) not in NO_SPLIT]
