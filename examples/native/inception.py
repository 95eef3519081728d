"""Inception-v3 on 3x299x299 images: the convolutional stem, three InceptionA blocks (35x35),
InceptionB (reduction to 17x17), four InceptionC blocks (factorised 7x7 convolutions),
InceptionD (reduction to 8x8), two InceptionE blocks (split 1x3 / 3x1 convolutions), 8x8
average pooling and a 10-way softmax. Every convolution has a fused ReLU; branches are joined
by concatenation along the channels.

Data: CIFAR-10 binary batches in the -d folder, upsampled to 299x299; else synthetic images
(256 by default: Inception-v3 at this size is slow without a GPU).
Flags: FFConfig's (-b, -e, -d ...), plus --num-samples N.
"""

from flexflow.core import *

from example_utils import cifar10_training_data, script_args

IMAGE_SIZE = 299
DEFAULT_SAMPLES = 256


class Inception:
    """Builds the blocks on one FFModel; channel counts are those of the Inception-v3 paper."""

    def __init__(self, ffmodel):
        self.ffmodel = ffmodel

    def conv(self, t, channels, kh, kw, stride=1, ph=0, pw=0):
        return self.ffmodel.conv2d(t, channels, kh, kw, stride, stride, ph, pw,
                                   ActiMode.AC_MODE_RELU)

    def avg_pool_branch(self, t, channels):
        t = self.ffmodel.pool2d(t, 3, 3, 1, 1, 1, 1, PoolType.POOL_AVG)
        return self.conv(t, channels, 1, 1)

    def max_pool_reduction(self, t):
        return self.ffmodel.pool2d(t, 3, 3, 2, 2, 0, 0)

    def stem(self, t):
        t = self.conv(t, 32, 3, 3, stride=2)
        t = self.conv(t, 32, 3, 3)
        t = self.conv(t, 64, 3, 3, ph=1, pw=1)
        t = self.max_pool_reduction(t)
        t = self.conv(t, 80, 1, 1)
        t = self.conv(t, 192, 3, 3)
        return self.max_pool_reduction(t)

    def block_a(self, t, pool_channels):
        b1 = self.conv(t, 64, 1, 1)
        b5 = self.conv(self.conv(t, 48, 1, 1), 64, 5, 5, ph=2, pw=2)
        b3 = self.conv(t, 64, 1, 1)
        b3 = self.conv(self.conv(b3, 96, 3, 3, ph=1, pw=1), 96, 3, 3, ph=1, pw=1)
        return self.ffmodel.concat([b1, b5, b3, self.avg_pool_branch(t, pool_channels)], 1)

    def block_b(self, t):
        b3 = self.conv(t, 384, 3, 3, stride=2)
        bd = self.conv(self.conv(t, 64, 1, 1), 96, 3, 3, ph=1, pw=1)
        bd = self.conv(bd, 96, 3, 3, stride=2)
        return self.ffmodel.concat([b3, bd, self.max_pool_reduction(t)], 1)

    def block_c(self, t, mid):
        b1 = self.conv(t, 192, 1, 1)
        b7 = self.conv(t, mid, 1, 1)
        b7 = self.conv(self.conv(b7, mid, 1, 7, pw=3), 192, 7, 1, ph=3)
        bd = self.conv(t, mid, 1, 1)
        bd = self.conv(self.conv(bd, mid, 7, 1, ph=3), mid, 1, 7, pw=3)
        bd = self.conv(self.conv(bd, mid, 7, 1, ph=3), 192, 1, 7, pw=3)
        return self.ffmodel.concat([b1, b7, bd, self.avg_pool_branch(t, 192)], 1)

    def block_d(self, t):
        b3 = self.conv(self.conv(t, 192, 1, 1), 320, 3, 3, stride=2)
        b7 = self.conv(t, 192, 1, 1)
        b7 = self.conv(self.conv(b7, 192, 1, 7, pw=3), 192, 7, 1, ph=3)
        b7 = self.conv(b7, 192, 3, 3, stride=2)
        return self.ffmodel.concat([b3, b7, self.max_pool_reduction(t)], 1)

    def split_3x3(self, t):
        """Parallel 1x3 and 3x1 convolutions of `t`, concatenated."""
        return self.ffmodel.concat([self.conv(t, 384, 1, 3, pw=1),
                                    self.conv(t, 384, 3, 1, ph=1)], 1)

    def block_e(self, t):
        b1 = self.conv(t, 320, 1, 1)
        b3 = self.split_3x3(self.conv(t, 384, 1, 1))
        bd = self.conv(self.conv(t, 448, 1, 1), 384, 3, 3, ph=1, pw=1)
        bd = self.split_3x3(bd)
        return self.ffmodel.concat([b1, b3, bd, self.avg_pool_branch(t, 192)], 1)

    def build(self, t):
        t = self.stem(t)
        for pool_channels in (32, 64, 64):
            t = self.block_a(t, pool_channels)
        t = self.block_b(t)
        for mid in (128, 160, 160, 192):
            t = self.block_c(t, mid)
        t = self.block_d(t)
        t = self.block_e(t)
        t = self.block_e(t)
        t = self.ffmodel.pool2d(t, 8, 8, 1, 1, 0, 0, PoolType.POOL_AVG)
        t = self.ffmodel.flat(t)
        t = self.ffmodel.dense(t, 10)
        return self.ffmodel.softmax(t)


def top_level_task():
    args = script_args()
    ffconfig = FFConfig()
    print(f"Python API batchSize({ffconfig.batch_size}) workersPerNode("
          f"{ffconfig.workers_per_node}) numNodes({ffconfig.num_nodes})")
    ffmodel = FFModel(ffconfig)

    input_tensor = ffmodel.create_tensor([ffconfig.batch_size, 3, IMAGE_SIZE, IMAGE_SIZE],
                                         DataType.DT_FLOAT)
    Inception(ffmodel).build(input_tensor)

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
    print("inception")
    top_level_task()
