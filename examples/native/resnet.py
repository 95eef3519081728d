"""ResNet-50 on 3x224x224 images: a 7x7 stem, four stages of bottleneck blocks (3, 4, 6 and 3
blocks; 1x1 -> 3x3 -> 1x1 convolutions, each batch-normalised, the last without the fused ReLU,
added to the shortcut and then ReLU'd), 7x7 average pooling and a 10-way softmax.

Data: CIFAR-10 binary batches in the -d folder, upsampled to 224x224; else synthetic images
(256 by default: ResNet-50 at this size is slow without a GPU).
Flags: FFConfig's (-b, -e, -d ...), plus --num-samples N.
"""

from flexflow.core import *

from example_utils import cifar10_training_data, script_args

IMAGE_SIZE = 224
DEFAULT_SAMPLES = 256
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, first stride)
EXPANSION = 4


def bottleneck(ffmodel, t, width, stride):
    """out = relu(bn(conv1x1(relu(bn(conv3x3(relu(bn(conv1x1(t))))))) + shortcut(t))."""
    if stride != 1 or t.dims[1] != width * EXPANSION:
        shortcut = ffmodel.conv2d(t, width * EXPANSION, 1, 1, stride, stride, 0, 0)
        shortcut = ffmodel.batch_norm(shortcut, False)
    else:
        shortcut = t
    t = ffmodel.conv2d(t, width, 1, 1, 1, 1, 0, 0)
    t = ffmodel.batch_norm(t)
    t = ffmodel.conv2d(t, width, 3, 3, stride, stride, 1, 1)
    t = ffmodel.batch_norm(t)
    t = ffmodel.conv2d(t, width * EXPANSION, 1, 1, 1, 1, 0, 0)
    t = ffmodel.batch_norm(t, False)
    t = ffmodel.add(t, shortcut)
    return ffmodel.relu(t)


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    print(f"Python API batchSize({ffconfig.batch_size}) workersPerNode("
          f"{ffconfig.workers_per_node}) numNodes({ffconfig.num_nodes})")
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 3, IMAGE_SIZE, IMAGE_SIZE],
                                         DataType.DT_FLOAT)
    t = ffmodel.conv2d(input_tensor, 64, 7, 7, 2, 2, 3, 3)
    t = ffmodel.batch_norm(t)
    t = ffmodel.pool2d(t, 3, 3, 2, 2, 1, 1)
    for width, blocks, stride in STAGES:
        for block in range(blocks):
            t = bottleneck(ffmodel, t, width, stride if block == 0 else 1)
    t = ffmodel.pool2d(t, 7, 7, 1, 1, 0, 0, PoolType.POOL_AVG)
    t = ffmodel.flat(t)
    t = ffmodel.dense(t, 10)
    t = ffmodel.softmax(t)

    ffmodel.optimizer = SGDOptimizer(ffmodel, 0.001)
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


if __name__ == "__main__":
    print("resnet")
    top_level_task()
