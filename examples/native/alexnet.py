"""AlexNet on 3x229x229 images: five convolutions (the first 11x11 with stride 4), three 3x3
max poolings, two 4096-unit dense layers and a 10-way softmax. Convolution kernels are Glorot
uniform with a fixed seed, their biases zero.

Data: CIFAR-10 binary batches in the -d folder, upsampled to 229x229; else synthetic images
(256 by default: AlexNet at this size is slow without a GPU).
Flags: FFConfig's (-b, -e, -d ...), plus -a/--test_acc (fail below
ModelAccuracy.CIFAR10_ALEXNET, checked on the last epoch) and --num-samples N.
"""

from flexflow.core import *

from accuracy import ModelAccuracy, check_accuracy
from example_utils import cifar10_training_data, script_args

IMAGE_SIZE = 229
DEFAULT_SAMPLES = 256


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    print(f"Python API batchSize({ffconfig.batch_size}) workersPerNode("
          f"{ffconfig.workers_per_node}) numNodes({ffconfig.num_nodes})")
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 3, IMAGE_SIZE, IMAGE_SIZE],
                                         DataType.DT_FLOAT)
    kernel_init = GlorotUniformInitializer(123)
    bias_init = ZeroInitializer()

    def conv(t, channels, kernel, stride, padding):
        return ffmodel.conv2d(t, channels, kernel, kernel, stride, stride, padding, padding,
                              ActiMode.AC_MODE_RELU, kernel_initializer=kernel_init,
                              bias_initializer=bias_init)

    t = conv(input_tensor, 64, 11, 4, 2)
    t = ffmodel.pool2d(t, 3, 3, 2, 2, 0, 0)
    t = conv(t, 192, 5, 1, 2)
    t = ffmodel.pool2d(t, 3, 3, 2, 2, 0, 0)
    t = conv(t, 384, 3, 1, 1)
    t = conv(t, 256, 3, 1, 1)
    t = conv(t, 256, 3, 1, 1)
    t = ffmodel.pool2d(t, 3, 3, 2, 2, 0, 0)
    t = ffmodel.flat(t)
    t = ffmodel.dense(t, 4096, ActiMode.AC_MODE_RELU)
    t = ffmodel.dense(t, 4096, ActiMode.AC_MODE_RELU)
    t = ffmodel.dense(t, 10)
    t = ffmodel.softmax(t)

    ffmodel.optimizer = SGDOptimizer(ffmodel, 0.01)
    ffmodel.compile(loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY,
                             MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
    label_tensor = ffmodel.label_tensor

    x_train, y_train = cifar10_training_data(ffconfig, args.num_samples or DEFAULT_SAMPLES,
                                             IMAGE_SIZE)
    dataloader_input = ffmodel.create_data_loader(input_tensor, x_train)
    dataloader_label = ffmodel.create_data_loader(label_tensor, y_train)
    num_samples = dataloader_input.num_samples

    ffmodel.init_layers()

    epochs = ffconfig.epochs
    ts_start = ffconfig.get_current_time()
    ffmodel.fit(x=dataloader_input, y=dataloader_label, epochs=epochs)
    ts_end = ffconfig.get_current_time()
    run_time = 1e-6 * (ts_end - ts_start)
    print("epochs %d, ELAPSED TIME = %.4fs, THROUGHPUT = %.2f samples/s"
          % (epochs, run_time, num_samples * epochs / run_time))

    if args.test_acc:
        check_accuracy(ffmodel, ModelAccuracy.CIFAR10_ALEXNET)


if __name__ == "__main__":
    print("alexnet")
    top_level_task()
