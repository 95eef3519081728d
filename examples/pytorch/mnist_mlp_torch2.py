"""The MNIST MLP of `mnist_mlp_torch.py` built in-process with `PyTorchModel.torch_to_ff` (no
file): FlexFlow trains it from the PyTorch model's own initial weights.

Flags: FFConfig's (-b, -e, -d ...), plus --num-samples N.
"""

from flexflow.core import *
from flexflow.torch.model import PyTorchModel

from mnist_mlp_torch import MLP
from torch_example_utils import mnist_training_data, script_args, train


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 784], DataType.DT_FLOAT)
    output_tensors = PyTorchModel(MLP()).torch_to_ff(ffmodel, [input_tensor])
    print(f"outputs: {[t.dims for t in output_tensors]}")

    ffmodel.optimizer = SGDOptimizer(ffmodel, 0.01)
    ffmodel.compile(loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY,
                             MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
    x_train, y_train = mnist_training_data(ffconfig, (784,), args.num_samples)
    loaders = [ffmodel.create_data_loader(input_tensor, x_train),
               ffmodel.create_data_loader(ffmodel.label_tensor, y_train)]
    ffmodel.init_layers()
    train(ffmodel, ffconfig, loaders)


if __name__ == "__main__":
    print("mnist mlp (from PyTorch, in-process)")
    top_level_task()
