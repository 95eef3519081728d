"""Fixed, learnable data for tiny_mlp.py (a module beside the script: importing it checks that
the launcher puts the script's folder on sys.path)."""

import numpy as np

FEATURES, CLASSES = 20, 4


def samples(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=(count, 1), dtype=np.int32)
    centres = rng.normal(size=(CLASSES, FEATURES)).astype(np.float32)
    x = centres[labels[:, 0]] + 0.5 * rng.normal(size=(count, FEATURES)).astype(np.float32)
    return x.astype(np.float32), labels


def compiled_mlp(ffconfig, lr: float):
    """(the FFModel of a small MLP compiled for SGD at `lr`, its input tensor)."""
    from flexflow.core import (ActiMode, DataType, FFModel, LossType, MetricsType,
                               SGDOptimizer)
    ffmodel = FFModel(ffconfig)
    x = ffmodel.create_tensor([ffconfig.batch_size, FEATURES], DataType.DT_FLOAT)
    t = ffmodel.dense(x, 16, ActiMode.AC_MODE_RELU)
    ffmodel.softmax(ffmodel.dense(t, CLASSES))
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, lr),
                    loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY])
    return ffmodel, x
