"""What the ONNX examples share: the native examples' data sets and flags, the `--file` and
`--exporter` flags, the export call, and FlexFlow's training loop with its timing line.

The `*_pt.py` scripts define a model in PyTorch and export it with `torch.onnx.export`, weights
included; the matching FlexFlow program imports the file with `ONNXModel(...).apply(...)`, so
training starts from the PyTorch model's weights (FlexFlow's own examples exported without
them). Each graph's input is named "input.1", as in FlexFlow's examples.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "native"))

from accuracy import ModelAccuracy, check_accuracy  # noqa: E402,F401
from example_utils import (cifar10_training_data, mnist_training_data,  # noqa: E402,F401
                           script_args)

INPUT_NAME = "input.1"


def flags(default_file: str) -> argparse.Namespace:
    """`-f/--file` (the .onnx file to write or read) and `--exporter`: torch's TorchScript-based
    exporter in training mode ("torchscript", FlexFlow's recipe: batch norms stay batch norms)
    or its newer default one ("dynamo", which folds batch norms into the convolutions)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("-f", "--file", default=default_file, help="the .onnx file")
    parser.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript")
    return parser.parse_known_args()[0]


def export(model, example, default_file: str) -> None:
    """Export `model` with its weights to the `--file` path, the batch dim left free."""
    import torch

    args = flags(default_file)
    options = dict(input_names=[INPUT_NAME], dynamic_axes={INPUT_NAME: {0: "batch"}})
    if args.exporter == "torchscript":
        options.update(dynamo=False, training=torch.onnx.TrainingMode.TRAINING,
                       do_constant_folding=False)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # the exporters' notices
        torch.onnx.export(model, (example,), args.file, **options)
    print(f"wrote {args.file}")


def compile_and_train(ffmodel, ffconfig, input_tensor, x_train, y_train) -> None:
    """SGD at FFConfig's `--lr` (0.01 by default; `--lr 0.05` takes the MLP past FlexFlow's 90%
    in one epoch of MNIST from PyTorch's initial weights), sparse categorical cross-entropy,
    `fit` with FlexFlow's timing line, then `eval` on the training set. compile() creates the
    weights from the ONNX file's initializers."""
    from flexflow.core import LossType, MetricsType, SGDOptimizer

    ffmodel.optimizer = SGDOptimizer(ffmodel, ffconfig.learning_rate)
    ffmodel.compile(loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY,
                             MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
    input_loader = ffmodel.create_data_loader(input_tensor, x_train)
    label_loader = ffmodel.create_data_loader(ffmodel.label_tensor, y_train)
    ffmodel.init_layers()
    epochs = ffconfig.epochs
    ts_start = ffconfig.get_current_time()
    ffmodel.fit(x=input_loader, y=label_loader, epochs=epochs)
    run_time = 1e-6 * (ffconfig.get_current_time() - ts_start)
    print("epochs %d, ELAPSED TIME = %.4fs, THROUGHPUT = %.2f samples/s"
          % (epochs, run_time, label_loader.num_samples * epochs / run_time))
    ffmodel.eval(x=input_loader, y=label_loader)
