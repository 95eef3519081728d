"""MNIST CNN: two 3x3 convolutions (32 and 64 channels), 2x2 max pooling, a 128-unit dense
layer and a 10-way softmax, trained with FFModel.fit.

Flags: FFConfig's (-b, -e, -d ...), plus -a/--test_acc (fail below ModelAccuracy.MNIST_CNN,
checked on the last epoch) and --num-samples N.
"""

from flexflow.core import *

from accuracy import ModelAccuracy, check_accuracy
from example_utils import mnist_training_data, script_args


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    print(f"Python API batchSize({ffconfig.batch_size}) workersPerNode("
          f"{ffconfig.workers_per_node}) numNodes({ffconfig.num_nodes})")
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 1, 28, 28], DataType.DT_FLOAT)
    t = ffmodel.conv2d(input_tensor, 32, 3, 3, 1, 1, 0, 0, ActiMode.AC_MODE_RELU)
    t = ffmodel.conv2d(t, 64, 3, 3, 1, 1, 0, 0, ActiMode.AC_MODE_RELU)
    t = ffmodel.pool2d(t, 2, 2, 2, 2, 0, 0)
    t = ffmodel.flat(t)
    t = ffmodel.dense(t, 128, ActiMode.AC_MODE_RELU)
    t = ffmodel.dense(t, 10)
    t = ffmodel.softmax(t)

    # Momentum: plain SGD at this rate stays below 95% training accuracy in the second epoch.
    ffmodel.optimizer = SGDOptimizer(ffmodel, 0.01, momentum=0.9)
    ffmodel.compile(loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY,
                             MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
    label_tensor = ffmodel.label_tensor

    x_train, y_train = mnist_training_data(ffconfig, (1, 28, 28), args.num_samples)
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
        check_accuracy(ffmodel, ModelAccuracy.MNIST_CNN)


if __name__ == "__main__":
    print("mnist cnn")
    top_level_task()
