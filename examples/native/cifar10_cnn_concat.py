"""CIFAR-10 CNN with two concatenations along the channel axis (axis 1): three parallel
convolutions (1x1, 3x3, 5x5) of the image are concatenated, convolved and pooled; then two
parallel convolutions of that are concatenated again before the classifier.

Data: the CIFAR-10 binary batches in the -d folder, else synthetic images (10000 by default).
Flags: FFConfig's (-b, -e, -d ...), plus -a/--test_acc (fail below
ModelAccuracy.CIFAR10_CNN_CONCAT, checked on the last epoch) and --num-samples N.
"""

from flexflow.core import *

from accuracy import ModelAccuracy, check_accuracy
from example_utils import cifar10_training_data, script_args

DEFAULT_SAMPLES = 10000


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    print(f"Python API batchSize({ffconfig.batch_size}) workersPerNode("
          f"{ffconfig.workers_per_node}) numNodes({ffconfig.num_nodes})")
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 3, 32, 32], DataType.DT_FLOAT)
    branches = [ffmodel.conv2d(input_tensor, 16, k, k, 1, 1, k // 2, k // 2,
                               ActiMode.AC_MODE_RELU) for k in (1, 3, 5)]
    t = ffmodel.concat(branches, 1)
    t = ffmodel.conv2d(t, 32, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ffmodel.pool2d(t, 2, 2, 2, 2, 0, 0)
    wide = ffmodel.conv2d(t, 32, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    narrow = ffmodel.conv2d(t, 32, 1, 1, 1, 1, 0, 0, ActiMode.AC_MODE_RELU)
    t = ffmodel.concat([wide, narrow], 1)
    t = ffmodel.pool2d(t, 2, 2, 2, 2, 0, 0)
    t = ffmodel.flat(t)
    t = ffmodel.dense(t, 256, ActiMode.AC_MODE_RELU)
    t = ffmodel.dense(t, 10)
    t = ffmodel.softmax(t)

    ffmodel.optimizer = SGDOptimizer(ffmodel, 0.01)
    ffmodel.compile(loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY,
                             MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
    label_tensor = ffmodel.label_tensor

    x_train, y_train = cifar10_training_data(ffconfig, args.num_samples or DEFAULT_SAMPLES)
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
        check_accuracy(ffmodel, ModelAccuracy.CIFAR10_CNN_CONCAT)


if __name__ == "__main__":
    print("cifar10 cnn concat")
    top_level_task()
