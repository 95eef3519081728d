"""A training script without an `if __name__ == "__main__":` guard, as the README's snippets
are written: a fit of a small MLP, then its first weight saved to the file named by --out."""

import argparse
import sys

import numpy as np
from flexflow.core import *

from tiny_data import CLASSES, FEATURES, samples

parser = argparse.ArgumentParser(add_help=False)
parser.add_argument("--out", required=True)
path = parser.parse_known_args()[0].out
print("training starts", flush=True)
ffconfig = FFConfig()
ffmodel = FFModel(ffconfig)
x = ffmodel.create_tensor([ffconfig.batch_size, FEATURES], DataType.DT_FLOAT)
t = ffmodel.dense(x, 16, ActiMode.AC_MODE_RELU)
ffmodel.softmax(ffmodel.dense(t, CLASSES))
ffmodel.compile(optimizer=SGDOptimizer(ffmodel, 0.1),
                loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                metrics=[MetricsType.METRICS_ACCURACY])
xs, ys = samples(ffconfig.batch_size * 6)
ffmodel.fit(x=ffmodel.create_data_loader(x, xs),
            y=ffmodel.create_data_loader(ffmodel.label_tensor, ys), epochs=2)
np.save(path, ffmodel.get_layer_by_id(0).get_parameter_by_id(0).get_weights(ffmodel))
print("training ends", file=sys.stderr, flush=True)
