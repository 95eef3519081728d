"""MNIST MLP (784-512-512-10) trained with FFModel.fit, then evaluated on the training set.

Flags: FFConfig's (-b, -e, -d ...), plus -a/--test_acc (fail below ModelAccuracy.MNIST_MLP,
checked on the evaluation pass) and --num-samples N.
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

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 784], DataType.DT_FLOAT)
    kernel_init = UniformInitializer(12, -1, 1)
    t = ffmodel.dense(input_tensor, 512, ActiMode.AC_MODE_RELU, kernel_initializer=kernel_init)
    t = ffmodel.dense(t, 512, ActiMode.AC_MODE_RELU)
    t = ffmodel.dense(t, 10)
    t = ffmodel.softmax(t)

    ffmodel.optimizer = SGDOptimizer(ffmodel, 0.01)
    ffmodel.compile(loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY,
                             MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
    label_tensor = ffmodel.label_tensor

    x_train, y_train = mnist_training_data(ffconfig, (784,), args.num_samples)
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

    ffmodel.eval(x=dataloader_input, y=dataloader_label)
    if args.test_acc:
        check_accuracy(ffmodel, ModelAccuracy.MNIST_MLP)


if __name__ == "__main__":
    print("mnist mlp")
    top_level_task()
