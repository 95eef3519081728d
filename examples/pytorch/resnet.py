"""ResNet-18 imported from the `.ff` file `resnet_torch.py` wrote (`-f FILE`, default
`resnet18.ff`), a softmax added, trained on CIFAR-10 (32x32) with FFModel.fit, then evaluated.

Flags: FFConfig's (-b, -e, -d ...), plus -f/--file and --num-samples N (default 256: ResNet-18 is
slow without a GPU).
"""

from flexflow.core import *
from flexflow.torch.model import PyTorchModel

from torch_example_utils import cifar10_training_data, ff_file, script_args, train

DEFAULT_SAMPLES = 256


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 3, 32, 32], DataType.DT_FLOAT)
    output_tensors = PyTorchModel.file_to_ff(ff_file("resnet18.ff"), ffmodel, [input_tensor])
    t = ffmodel.softmax(output_tensors[0])

    ffmodel.optimizer = SGDOptimizer(ffmodel, 0.01, momentum=0.9)
    ffmodel.compile(loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY,
                             MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
    x_train, y_train = cifar10_training_data(ffconfig, args.num_samples or DEFAULT_SAMPLES)
    loaders = [ffmodel.create_data_loader(input_tensor, x_train),
               ffmodel.create_data_loader(ffmodel.label_tensor, y_train)]
    ffmodel.init_layers()
    train(ffmodel, ffconfig, loaders)
    ffmodel.eval(x=loaders[0], y=loaders[1])


if __name__ == "__main__":
    print("resnet-18 (from PyTorch)")
    top_level_task()
