"""MNIST MLP imported from the `.ff` file `mnist_mlp_torch.py` wrote (`-f FILE`, default
`mlp.ff`), trained with FFModel.fit, then evaluated on the training set.

Flags: FFConfig's (-b, -e, -d ...), plus -f/--file and --num-samples N.
"""

from flexflow.core import *
from flexflow.torch.model import PyTorchModel

from torch_example_utils import ff_file, mnist_training_data, script_args, train


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 784], DataType.DT_FLOAT)
    output_tensors = PyTorchModel.file_to_ff(ff_file("mlp.ff"), ffmodel, [input_tensor])
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
    ffmodel.eval(x=loaders[0], y=loaders[1])


if __name__ == "__main__":
    print("mnist mlp (from PyTorch, file route)")
    top_level_task()
