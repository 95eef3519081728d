"""The networks the search benchmarks use, built with the FFModel API, and a helper that gives
their graph and training objective without compiling (planning for machines one does not have).

    alexnet           AlexNet (Krizhevsky 2014 "one weird trick" variant), 3x224x224
    alexnet_cifar     the same shape of network at CPU scale: 3x32x32, 4096-wide dense layers
    cifar10_cnn       FlexFlow's CIFAR-10 example CNN: four 3x3 convolutions, dense 512, 3x32x32
    inception_v3      Inception-v3 (Szegedy et al. 2016), 3x299x299
    resnet14_cifar    a CIFAR ResNet with batch norm: basic blocks 2-2-2, 32 to 128 channels
    resnet18          ResNet-18 (He et al. 2016): a 7x7 stem, basic blocks 2-2-2-2, any image size
    resnet18_cifar    ResNet-18's basic blocks (2-2-2-2, 64 to 512 channels) on 3x32x32 images
    resnet50          ResNet-50 as FlexFlow's native resnet.py: bottleneck blocks 3-4-6-3
    resnet101         ResNet-101 (He et al. 2016), 3x224x224, bottleneck blocks 3-4-23-3
    transformer_lm    a decoder-style language model: embedding, attention blocks, vocab softmax
    gpt2_medium       transformer_lm at GPT-2 medium's size: 24 blocks of width 1024, 16 heads,
                      1024 positions, a 50,257-token vocabulary (405 M weights: GPT-2 medium's
                      355 M, less its position table, plus an output layer of its own)
"""

from __future__ import annotations

from flexflow.core import ActiMode, DataType, FFConfig, FFModel, PoolType
from flexflow.ops.spec import TensorSpec
from flexflow.scheduler.taskgraph import Objective

RELU = ActiMode.AC_MODE_RELU


def _alexnet_layers(ff, x, convs, pool, classes):
    """AlexNet's layers on `x`: five ReLU convolutions, each `(channels, kernel, stride, pad)`,
    max pools of size `pool` and stride 2 after the first, second and fifth, then two 4096-wide
    ReLU dense layers and the classifier's softmax."""
    t = x
    for index, (channels, kernel, stride, pad) in enumerate(convs):
        t = ff.conv2d(t, channels, kernel, kernel, stride, stride, pad, pad, RELU)
        if index in (0, 1, 4):
            t = ff.pool2d(t, pool, pool, 2, 2, 0, 0)
    t = ff.flat(t)
    t = ff.dense(t, 4096, RELU)
    t = ff.dense(t, 4096, RELU)
    ff.softmax(ff.dense(t, classes))


def alexnet(ff, batch, image=224, classes=1000):
    x = ff.create_tensor([batch, 3, image, image])
    _alexnet_layers(ff, x, [(64, 11, 4, 2), (192, 5, 1, 2), (384, 3, 1, 1), (256, 3, 1, 1),
                            (256, 3, 1, 1)], pool=3, classes=classes)
    return [x]


def alexnet_cifar(ff, batch, classes=10):
    """AlexNet's structure at a size a CPU trains: five convolutions on 32x32 images, then
    dense layers as wide as AlexNet's (4096), which hold almost all of the 21 M weights."""
    x = ff.create_tensor([batch, 3, 32, 32])
    _alexnet_layers(ff, x, [(32, 5, 1, 2), (64, 5, 1, 2), (96, 3, 1, 1), (96, 3, 1, 1),
                            (64, 3, 1, 1)], pool=2, classes=classes)
    return [x]


def cifar10_cnn(ff, batch, classes=10, second_padding=0):
    """The network of examples/native/cifar10_cnn.py: two blocks of a padded and an unpadded 3x3
    ReLU convolution (32, then 64 channels) and a 2x2 max pool, a 512-wide ReLU dense layer.
    `second_padding=1` pads the second convolution of each block too (bench/step_time.py's
    variant, 8x8 maps before the dense layer instead of 6x6)."""
    x = ff.create_tensor([batch, 3, 32, 32])
    t = x
    for channels in (32, 64):
        t = ff.conv2d(t, channels, 3, 3, 1, 1, 1, 1, RELU)
        t = ff.conv2d(t, channels, 3, 3, 1, 1, second_padding, second_padding, RELU)
        t = ff.pool2d(t, 2, 2, 2, 2, 0, 0)
    t = ff.dense(ff.flat(t), 512, RELU)
    ff.softmax(ff.dense(t, classes))
    return [x]


def _conv_bn(ff, t, channels, kh, kw, stride=1, ph=0, pw=0):
    t = ff.conv2d(t, channels, kh, kw, stride, stride, ph, pw)
    return ff.batch_norm(t)  # with the fused ReLU, as FlexFlow's batch_norm


def _inception_a(ff, t, pool_channels):
    a = _conv_bn(ff, t, 64, 1, 1)
    b = _conv_bn(ff, _conv_bn(ff, t, 48, 1, 1), 64, 5, 5, 1, 2, 2)
    c = _conv_bn(ff, _conv_bn(ff, _conv_bn(ff, t, 64, 1, 1), 96, 3, 3, 1, 1, 1), 96, 3, 3, 1,
                 1, 1)
    d = _conv_bn(ff, ff.pool2d(t, 3, 3, 1, 1, 1, 1, PoolType.POOL_AVG), pool_channels, 1, 1)
    return ff.concat([a, b, c, d], 1)


def _reduction_a(ff, t):
    a = _conv_bn(ff, t, 384, 3, 3, 2)
    b = _conv_bn(ff, _conv_bn(ff, _conv_bn(ff, t, 64, 1, 1), 96, 3, 3, 1, 1, 1), 96, 3, 3, 2)
    c = ff.pool2d(t, 3, 3, 2, 2, 0, 0)
    return ff.concat([a, b, c], 1)


def _inception_c(ff, t, width):
    a = _conv_bn(ff, t, 192, 1, 1)
    b = _conv_bn(ff, t, width, 1, 1)
    b = _conv_bn(ff, _conv_bn(ff, b, width, 1, 7, 1, 0, 3), 192, 7, 1, 1, 3, 0)
    c = _conv_bn(ff, t, width, 1, 1)
    for channels in (width, width, width):
        c = _conv_bn(ff, _conv_bn(ff, c, channels, 7, 1, 1, 3, 0), channels, 1, 7, 1, 0, 3)
    c = _conv_bn(ff, c, 192, 1, 1)
    d = _conv_bn(ff, ff.pool2d(t, 3, 3, 1, 1, 1, 1, PoolType.POOL_AVG), 192, 1, 1)
    return ff.concat([a, b, c, d], 1)


def _reduction_b(ff, t):
    a = _conv_bn(ff, _conv_bn(ff, t, 192, 1, 1), 320, 3, 3, 2)
    b = _conv_bn(ff, t, 192, 1, 1)
    b = _conv_bn(ff, _conv_bn(ff, b, 192, 1, 7, 1, 0, 3), 192, 7, 1, 1, 3, 0)
    b = _conv_bn(ff, b, 192, 3, 3, 2)
    c = ff.pool2d(t, 3, 3, 2, 2, 0, 0)
    return ff.concat([a, b, c], 1)


def _inception_e(ff, t):
    a = _conv_bn(ff, t, 320, 1, 1)
    b = _conv_bn(ff, t, 384, 1, 1)
    b = ff.concat([_conv_bn(ff, b, 384, 1, 3, 1, 0, 1), _conv_bn(ff, b, 384, 3, 1, 1, 1, 0)], 1)
    c = _conv_bn(ff, _conv_bn(ff, t, 448, 1, 1), 384, 3, 3, 1, 1, 1)
    c = ff.concat([_conv_bn(ff, c, 384, 1, 3, 1, 0, 1), _conv_bn(ff, c, 384, 3, 1, 1, 1, 0)], 1)
    d = _conv_bn(ff, ff.pool2d(t, 3, 3, 1, 1, 1, 1, PoolType.POOL_AVG), 192, 1, 1)
    return ff.concat([a, b, c, d], 1)


def inception_v3(ff, batch, classes=1000):
    x = ff.create_tensor([batch, 3, 299, 299])
    t = _conv_bn(ff, x, 32, 3, 3, 2)
    t = _conv_bn(ff, t, 32, 3, 3)
    t = _conv_bn(ff, t, 64, 3, 3, 1, 1, 1)
    t = ff.pool2d(t, 3, 3, 2, 2, 0, 0)
    t = _conv_bn(ff, t, 80, 1, 1)
    t = _conv_bn(ff, t, 192, 3, 3)
    t = ff.pool2d(t, 3, 3, 2, 2, 0, 0)
    for pool_channels in (32, 64, 64):
        t = _inception_a(ff, t, pool_channels)
    t = _reduction_a(ff, t)
    for width in (128, 160, 160, 192):
        t = _inception_c(ff, t, width)
    t = _reduction_b(ff, t)
    t = _inception_e(ff, _inception_e(ff, t))
    t = ff.flat(ff.pool2d(t, 8, 8, 1, 1, 0, 0, PoolType.POOL_AVG))
    ff.softmax(ff.dense(t, classes))
    return [x]


def _bottleneck(ff, t, width, stride):
    if stride != 1 or t.dims[1] != width * 4:
        shortcut = ff.batch_norm(ff.conv2d(t, width * 4, 1, 1, stride, stride, 0, 0), False)
    else:
        shortcut = t
    t = _conv_bn(ff, t, width, 1, 1)
    t = _conv_bn(ff, t, width, 3, 3, stride, 1, 1)
    t = ff.batch_norm(ff.conv2d(t, width * 4, 1, 1, 1, 1, 0, 0), False)
    return ff.relu(ff.add(t, shortcut))


def _bottleneck_resnet(ff, batch, blocks, classes):
    """An ImageNet ResNet of bottleneck blocks on 3x224x224 images: a 7x7 stem (batch norm,
    ReLU) and a max pool, four stages of `blocks` blocks (64 to 512 wide, 4x that out), 7x7
    average pooling, the classifier's softmax."""
    x = ff.create_tensor([batch, 3, 224, 224])
    t = _conv_bn(ff, x, 64, 7, 7, 2, 3, 3)
    t = ff.pool2d(t, 3, 3, 2, 2, 1, 1)
    for (width, stride), count in zip(((64, 1), (128, 2), (256, 2), (512, 2)), blocks):
        for block in range(count):
            t = _bottleneck(ff, t, width, stride if block == 0 else 1)
    t = ff.flat(ff.pool2d(t, 7, 7, 1, 1, 0, 0, PoolType.POOL_AVG))
    ff.softmax(ff.dense(t, classes))
    return [x]


def resnet50(ff, batch, classes=10):
    """The network of examples/native/resnet.py (FlexFlow's native ResNet-50, which reads
    3x229x229 images; ours and this one 3x224x224): bottleneck blocks 3-4-6-3, a 10-way
    softmax."""
    return _bottleneck_resnet(ff, batch, (3, 4, 6, 3), classes)


def resnet101(ff, batch, classes=1000):
    return _bottleneck_resnet(ff, batch, (3, 4, 23, 3), classes)


def _basic_block(ff, t, width, stride, shortcut_norm=True):
    """relu(bn(conv3x3(relu(bn(conv3x3(t))))) + shortcut(t)): the shortcut is `t`, or where the
    block changes the shape a strided 1x1 convolution, batch-normalised if `shortcut_norm`."""
    if stride != 1 or t.dims[1] != width:
        shortcut = ff.conv2d(t, width, 1, 1, stride, stride, 0, 0, use_bias=False)
        if shortcut_norm:
            shortcut = ff.batch_norm(shortcut, False)
    else:
        shortcut = t
    t = ff.batch_norm(ff.conv2d(t, width, 3, 3, stride, stride, 1, 1, use_bias=False))
    t = ff.batch_norm(ff.conv2d(t, width, 3, 3, 1, 1, 1, 1, use_bias=False), False)
    return ff.relu(ff.add(t, shortcut))


def _cifar_resnet(ff, batch, widths, classes, shortcut_norm):
    """A CIFAR ResNet of basic blocks: a 3x3 stem (batch norm, ReLU) as wide as the first stage,
    no pooling, two blocks per stage of `widths` (every stage after the first halving the maps),
    global average pooling, the classifier's softmax."""
    x = ff.create_tensor([batch, 3, 32, 32])
    t = ff.batch_norm(ff.conv2d(x, widths[0], 3, 3, 1, 1, 1, 1, use_bias=False))
    for stage, width in enumerate(widths):
        t = _basic_block(ff, t, width, 1 if stage == 0 else 2, shortcut_norm)
        t = _basic_block(ff, t, width, 1, shortcut_norm)
    size = t.dims[2]
    t = ff.flat(ff.pool2d(t, size, size, 1, 1, 0, 0, PoolType.POOL_AVG))
    ff.softmax(ff.dense(t, classes))
    return [x]


def resnet18(ff, batch, image=224, classes=1000):
    """ImageNet's ResNet-18 on 3 x image x image inputs: a 7x7 stride-2 stem (batch norm, ReLU)
    and a 3x3 stride-2 max pool, four stages of two basic blocks (64 to 512 channels, every stage
    after the first halving the maps), global average pooling, the classifier's softmax."""
    x = ff.create_tensor([batch, 3, image, image])
    t = ff.batch_norm(ff.conv2d(x, 64, 7, 7, 2, 2, 3, 3, use_bias=False))
    t = ff.pool2d(t, 3, 3, 2, 2, 1, 1)
    for stage, width in enumerate((64, 128, 256, 512)):
        t = _basic_block(ff, t, width, 1 if stage == 0 else 2)
        t = _basic_block(ff, t, width, 1)
    size = t.dims[2]
    t = ff.flat(ff.pool2d(t, size, size, 1, 1, 0, 0, PoolType.POOL_AVG))
    ff.softmax(ff.dense(t, classes))
    return [x]


def resnet18_cifar(ff, batch, classes=10):
    """ResNet-18 as it is trained on CIFAR-10: a 3x3 stem without pooling, four stages of two
    basic blocks, global average pooling over the last 4x4 maps."""
    return _cifar_resnet(ff, batch, (64, 128, 256, 512), classes, shortcut_norm=True)


def resnet14_cifar(ff, batch, classes=10):
    """A batch-norm network a CPU trains (bench/vs_ddp.py): He et al.'s CIFAR ResNet with two
    basic blocks per stage (6n + 2 = 14 layers for n = 2) at twice its widths (32, 64, 128),
    the shortcuts of stages 2 and 3 strided 1x1 convolutions without batch norm, so 13 batch
    norms in all (the stem's and two per block); 8x8 maps before the average pooling."""
    return _cifar_resnet(ff, batch, (32, 64, 128), classes, shortcut_norm=False)


def transformer_lm(ff, batch, seq=64, vocab=8192, width=512, heads=8, layers=4):
    """Tokens -> embedding -> `layers` x (attention + residual + layer norm, two dense layers +
    residual + layer norm) -> next-token softmax over the vocabulary at every position."""
    tokens = ff.create_tensor([batch, seq], DataType.DT_INT32)
    t = ff.embedding(tokens, vocab, width)
    for _ in range(layers):
        t = ff.layer_norm(ff.add(ff.multihead_attention(t, t, t, width, heads), t), [-1])
        f = ff.dense(ff.dense(t, 4 * width, ActiMode.AC_MODE_GELU), width)
        t = ff.layer_norm(ff.add(f, t), [-1])
    ff.softmax(ff.dense(t, vocab))
    return [tokens]


def gpt2_medium(ff, batch):
    """GPT-2 medium's shape (Radford et al. 2019) in transformer_lm's blocks (post-norm, one
    GELU dense of 4x the width): the model users bring now, which one device does not train."""
    return transformer_lm(ff, batch, seq=1024, vocab=50257, width=1024, heads=16, layers=24)


def graph_of(build, batch: int):
    """(graph, objective) of `build` for training with a sparse cross-entropy on the softmax,
    as compile() would make them, without devices."""
    ff = FFModel(FFConfig(argv=[], batch_size=batch))
    build(ff, batch)
    graph = ff.graph
    output = graph.tensors[graph.layers[-1].outputs[0]].spec
    label = graph.add_input(TensorSpec(output.shape[:-1] + (1,), "int32")).id
    graph.inputs.remove(label)
    return graph, Objective(graph.layers[-1].outputs[0], label, through_softmax=True)
