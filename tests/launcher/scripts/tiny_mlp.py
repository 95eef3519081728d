"""A FlexFlow-style training script for the launcher tests: a small MLP trained with a
hand-written loop (`train_step`) on fixed data, printing every step's loss in full precision.

Own flag: --steps N (default 4). Everything else is FFConfig's.
"""

import argparse
import sys

from flexflow.core import *

from tiny_data import CLASSES, FEATURES, samples


def top_level_task():
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--steps", type=int, default=4)
    steps = parser.parse_known_args()[0].steps
    print(f"script argv: {sys.argv[1:]}")
    ffconfig = FFConfig()
    print(f"workersPerNode({ffconfig.workers_per_node}) batchSize({ffconfig.batch_size})")
    ffmodel = FFModel(ffconfig)
    x = ffmodel.create_tensor([ffconfig.batch_size, FEATURES], DataType.DT_FLOAT)
    t = ffmodel.dense(x, 16, ActiMode.AC_MODE_RELU)
    t = ffmodel.dense(t, CLASSES)
    t = ffmodel.softmax(t)
    ffmodel.optimizer = SGDOptimizer(ffmodel, 0.1)
    ffmodel.compile(loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY])
    xs, ys = samples(ffconfig.batch_size * steps)
    x_loader = ffmodel.create_data_loader(x, xs)
    y_loader = ffmodel.create_data_loader(ffmodel.label_tensor, ys)
    for step in range(steps):
        x_loader.next_batch(ffmodel)
        y_loader.next_batch(ffmodel)
        print(f"step {step} loss {ffmodel.train_step()!r}")


if __name__ == "__main__":
    top_level_task()
