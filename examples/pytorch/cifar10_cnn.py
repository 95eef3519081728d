"""The two-input CNN of `cifar10_cnn_torch.py` imported from its `.ff` file (`-f FILE`, default
`cnn.ff`), both inputs fed the same CIFAR-10 images, a softmax added on the first output, then
trained with FFModel.fit.

Flags: FFConfig's (-b, -e, -d ...), plus -f/--file and --num-samples N.
"""

from flexflow.core import *
from flexflow.torch.model import PyTorchModel

from torch_example_utils import cifar10_training_data, ff_file, script_args, train

DEFAULT_SAMPLES = 10000


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 3, 32, 32], DataType.DT_FLOAT)
    output_tensors = PyTorchModel.file_to_ff(ff_file("cnn.ff"), ffmodel,
                                             [input_tensor, input_tensor])
    t = ffmodel.softmax(output_tensors[0])

    layers = ffmodel.get_layers()
    print(f"{len(layers)} layers; the first: {layers[0]}")
    print(f"layer 'relu_1': {ffmodel.get_layer_by_name('relu_1')}")

    ffmodel.optimizer = SGDOptimizer(ffmodel, 0.01)
    ffmodel.compile(loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY,
                             MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
    x_train, y_train = cifar10_training_data(ffconfig, args.num_samples or DEFAULT_SAMPLES)
    loaders = [ffmodel.create_data_loader(input_tensor, x_train),
               ffmodel.create_data_loader(ffmodel.label_tensor, y_train)]
    ffmodel.init_layers()
    train(ffmodel, ffconfig, loaders)


if __name__ == "__main__":
    print("cifar10 cnn (from PyTorch)")
    top_level_task()
