"""What the PyTorch examples share: the native examples' data sets and flags, a `--file` flag
for the `.ff` file, and FlexFlow's training loop with its timing line.

The FlexFlow programs here (`mnist_mlp.py`, `cifar10_cnn.py`, `resnet.py`) import a file that the
matching `*_torch.py` script wrote in plain Python; with the file's `.npz` beside it, training
starts from the PyTorch model's weights.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "native"))

from example_utils import (cifar10_training_data, mnist_training_data,  # noqa: E402,F401
                           script_args)


def ff_file(default: str) -> str:
    """The `.ff` file named by `-f/--file`, else `default`."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("-f", "--file", default=default, help="the .ff file to read or write")
    return parser.parse_known_args()[0].file


def train(ffmodel, ffconfig, loaders) -> None:
    """`fit` over the data loaders (inputs, then the label), with FlexFlow's timing line."""
    *inputs, labels = loaders
    epochs = ffconfig.epochs
    ts_start = ffconfig.get_current_time()
    ffmodel.fit(x=inputs, y=labels, epochs=epochs)
    run_time = 1e-6 * (ffconfig.get_current_time() - ts_start)
    print("epochs %d, ELAPSED TIME = %.4fs, THROUGHPUT = %.2f samples/s"
          % (epochs, run_time, labels.num_samples * epochs / run_time))
