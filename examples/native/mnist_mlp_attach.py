"""MNIST MLP trained by a hand-written loop instead of FFModel.fit: each batch is fed with
Tensor.set_tensor, then forward / zero_gradients / backward / update run inside a trace.

Flags: FFConfig's (-b, -e, -d ...), plus -a/--test_acc (fail below ModelAccuracy.MNIST_MLP,
checked on the last epoch) and --num-samples N.
"""

from flexflow.core import *

from accuracy import ModelAccuracy, check_accuracy
from example_utils import mnist_training_data, script_args


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    batch_size = ffconfig.batch_size
    print(f"Python API batchSize({batch_size}) workersPerNode({ffconfig.workers_per_node}) "
          f"numNodes({ffconfig.num_nodes})")
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([batch_size, 784], DataType.DT_FLOAT)
    t = ffmodel.dense(input_tensor, 512, ActiMode.AC_MODE_RELU)
    t = ffmodel.dense(t, 512, ActiMode.AC_MODE_RELU)
    t = ffmodel.dense(t, 10)
    t = ffmodel.softmax(t)

    ffmodel.optimizer = SGDOptimizer(ffmodel, 0.01)
    ffmodel.compile(loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY,
                             MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
    label_tensor = ffmodel.label_tensor
    ffmodel.init_layers()

    x_train, y_train = mnist_training_data(ffconfig, (784,), args.num_samples)
    num_batches = len(x_train) // batch_size
    num_samples = num_batches * batch_size

    epochs = ffconfig.epochs
    ts_start = ffconfig.get_current_time()
    for epoch in range(epochs):
        ffmodel.reset_metrics()
        for b in range(num_batches):
            batch = slice(b * batch_size, (b + 1) * batch_size)
            input_tensor.set_tensor(ffmodel, x_train[batch])
            label_tensor.set_tensor(ffmodel, y_train[batch])
            ffconfig.begin_trace(111)
            ffmodel.forward()
            ffmodel.zero_gradients()
            ffmodel.backward()
            ffmodel.update()
            ffconfig.end_trace(111)
        print(f"epoch {epoch}: accuracy "
              f"{ffmodel.get_perf_metrics().get_accuracy():.2f}%")
    ts_end = ffconfig.get_current_time()
    run_time = 1e-6 * (ts_end - ts_start)
    print("epochs %d, ELAPSED TIME = %.4fs, THROUGHPUT = %.2f samples/s"
          % (epochs, run_time, num_samples * epochs / run_time))

    if args.test_acc:
        check_accuracy(ffmodel, ModelAccuracy.MNIST_MLP)


if __name__ == "__main__":
    print("mnist mlp attach")
    top_level_task()
