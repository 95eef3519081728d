"""Split: three convolutions of the image are concatenated along the channels, the result is
split back into three equal parts with FFModel.split, and only the middle part feeds the
classifier (the other two outputs are left unused).

Data: synthetic 3x32x32 images (or CIFAR-10 binary batches in the -d folder; 1024 by default).
Flags: FFConfig's (-b, -e, -d ...), plus --num-samples N.
"""

from flexflow.core import *

from example_utils import cifar10_training_data, script_args

DEFAULT_SAMPLES = 1024


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 3, 32, 32], DataType.DT_FLOAT)
    convs = [ffmodel.conv2d(input_tensor, 16, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
             for _ in range(3)]
    t = ffmodel.concat(convs, 1)
    ts = ffmodel.split(t, 3, 1)
    print(f"split {t.dims} into {[part.dims for part in ts]}")
    t = ffmodel.pool2d(ts[1], 2, 2, 2, 2, 0, 0)
    t = ffmodel.flat(t)
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


if __name__ == "__main__":
    print("split")
    top_level_task()
