"""Each Keras layer computes what the FFModel ops it stands for compute: the same outputs (training
and inference mode), the same gradient flowing back into it, the same weight gradients.

The reference is an FFModel built by hand with the op and the explicit arguments the layer should
map to (e.g. the paddings that 'same' means for that input), given the same weights and data. A
pre-layer (a shape-keeping Dense or 1x1 Conv2D) in front of the layer makes the gradient the layer
passes back observable, as the gradient of the pre-layer's output. (The FFModel ops themselves
are checked against PyTorch in tests/ops.)
"""

import numpy as np
import pytest

from flexflow.core import (ActiMode, AggrMode, DataType, FFConfig, FFModel, LossType, PoolType,
                           SGDOptimizer)
from flexflow.keras import backend as K
from flexflow.keras.layers import (Activation, Add, AveragePooling2D, BatchNormalization,
                                   Concatenate, Conv2D, Dense, Dropout, Embedding, Flatten,
                                   Input, Maximum, MaxPooling2D, Minimum, Multiply, Permute,
                                   Reshape, Subtract)
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

B = 8
MSE = LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE
DTYPES = {"float32": DataType.DT_FLOAT, "int32": DataType.DT_INT32}


def config():
    return FFConfig(argv=[], batch_size=B)


def keras_pre(shape):
    return Dense(shape[-1]) if len(shape) < 3 else Conv2D(shape[0], kernel_size=(1, 1))


def ff_pre(ffmodel, t):
    if t.num_dims < 4:
        return ffmodel.dense(t, t.dims[-1])
    return ffmodel.conv2d(t, t.dims[1], 1, 1, 1, 1, 0, 0)


def build_pair(keras_fn, ff_fn, shapes, dtype, pre):
    inputs = [Input(s, dtype=dtype) for s in shapes]
    pres = [keras_pre(s)(t) for s, t in zip(shapes, inputs)] if pre else inputs
    model = Model(inputs, keras_fn(pres if len(pres) > 1 else pres[0]), ffconfig=config())
    model.compile(SGD(0.0), "mean_squared_error")

    ffmodel = FFModel(config())
    ff_inputs = [ffmodel.create_tensor((B,) + s, DTYPES[dtype]) for s in shapes]
    ff_pres = [ff_pre(ffmodel, t) for t in ff_inputs] if pre else ff_inputs
    ff_out = ff_fn(ffmodel, ff_pres if len(ff_pres) > 1 else ff_pres[0])
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, 0.0), loss_type=MSE, metrics=[])
    return model, (pres if pre else []), ffmodel, ff_inputs, (ff_pres if pre else []), ff_out


def copy_weights(source: FFModel, target: FFModel):
    """Same op sequence in both models (checked), then target's weights := source's."""
    ops, ref_ops = source.get_layers(), target.get_layers()
    assert [type(o).__name__ for o in ops.values()] == [type(o).__name__ for o in ref_ops.values()]
    for i, op in ops.items():
        for k in range(op.get_number_parameters()):
            ref_ops[i].get_parameter_by_id(k).set_weights(target, op.get_parameter_by_id(k)
                                                          .get_weights(source))


def check_layer(keras_fn, ff_fn, shapes, dtype="float32", pre=True, high=None):
    model, pres, ffmodel, ff_inputs, ff_pres, ff_out = build_pair(keras_fn, ff_fn, shapes, dtype,
                                                                  pre)
    kmodel = model.ffmodel
    copy_weights(kmodel, ffmodel)
    rng = np.random.default_rng(0)
    for shape, k_in, ref_in in zip(shapes, model.input, ff_inputs):
        data = (rng.integers(0, high, (B,) + shape).astype(dtype) if dtype != "float32"
                else rng.normal(size=(B,) + shape).astype(dtype))
        k_in.ffhandle.set_tensor(kmodel, data)
        ref_in.set_tensor(ffmodel, data)
    label = rng.normal(size=ff_out.dims).astype(np.float32)
    kmodel.label_tensor.set_tensor(kmodel, label)
    ffmodel.label_tensor.set_tensor(ffmodel, label)
    for m in (kmodel, ffmodel):
        m.forward()
        m.backward()

    def close(a, b, what):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=what)

    close(model.output.ffhandle.get_tensor(kmodel), ff_out.get_tensor(ffmodel), "output")
    for t, ref in zip(pres, ff_pres):
        close(t.ffhandle.get_gradients(kmodel), ref.get_gradients(ffmodel), "input gradient")
    for i, op in kmodel.get_layers().items():
        for k in range(op.get_number_parameters()):
            close(op.get_parameter_by_id(k).get_gradients(kmodel),
                  ffmodel.get_layer_by_id(i).get_parameter_by_id(k).get_gradients(ffmodel),
                  f"gradient of weight {k} of layer {i}")
    for m in (kmodel, ffmodel):
        m.forward(training=False)
    close(model.output.ffhandle.get_tensor(kmodel), ff_out.get_tensor(ffmodel), "inference output")


CASES = {
    "dense": (lambda t: Dense(6)(t), lambda f, t: f.dense(t, 6), [(5,)]),
    "dense relu no bias": (lambda t: Dense(6, activation="relu", use_bias=False)(t),
                           lambda f, t: f.dense(t, 6, ActiMode.AC_MODE_RELU, False), [(5,)]),
    "dense softmax": (lambda t: Dense(4, activation="softmax")(t),
                      lambda f, t: f.softmax(f.dense(t, 4)), [(5,)]),
    "dense tanh 3-d": (lambda t: Dense(4, activation="tanh")(t),
                       lambda f, t: f.dense(t, 4, ActiMode.AC_MODE_TANH), [(3, 5)]),
    "conv same": (lambda t: Conv2D(4, kernel_size=(3, 3), padding="same", activation="relu")(t),
                  lambda f, t: f.conv2d(t, 4, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU),
                  [(2, 7, 7)]),
    "conv same stride 2 (asymmetric)": (
        lambda t: Conv2D(4, kernel_size=(2, 2), strides=(2, 2), padding="same")(t),
        lambda f, t: f.conv2d(t, 4, 2, 2, 2, 2, (0, 1), (0, 1)), [(2, 7, 7)]),
    "conv explicit padding, groups": (
        lambda t: Conv2D(4, kernel_size=3, padding=(1, 2), groups=2, activation="sigmoid")(t),
        lambda f, t: f.conv2d(t, 4, 3, 3, 1, 1, 1, 2, ActiMode.AC_MODE_SIGMOID, 2), [(2, 6, 6)]),
    "maxpool": (lambda t: MaxPooling2D((2, 2))(t),
                lambda f, t: f.pool2d(t, 2, 2, 2, 2, 0, 0, PoolType.POOL_MAX), [(3, 6, 6)]),
    "maxpool same": (lambda t: MaxPooling2D((3, 3), strides=(2, 2), padding="same")(t),
                     lambda f, t: f.pool2d(t, 3, 3, 2, 2, 1, 1, PoolType.POOL_MAX), [(3, 7, 7)]),
    "avgpool same": (lambda t: AveragePooling2D((2, 2), strides=(1, 1), padding="same")(t),
                     lambda f, t: f.pool2d(t, 2, 2, 1, 1, (0, 1), (0, 1), PoolType.POOL_AVG,
                                           count_include_pad=False), [(3, 5, 5)]),
    "avgpool explicit padding": (
        lambda t: AveragePooling2D((2, 2), padding=(1, 1))(t),
        lambda f, t: f.pool2d(t, 2, 2, 2, 2, 1, 1, PoolType.POOL_AVG), [(3, 6, 6)]),
    "flatten": (lambda t: Flatten()(t), lambda f, t: f.flat(t), [(3, 4, 4)]),
    "dropout": (lambda t: Dropout(0.5, seed=3)(t), lambda f, t: f.dropout(t, 0.5, 3), [(40,)]),
    "reshape": (lambda t: Reshape((4, -1))(t), lambda f, t: f.reshape(t, (B, 4, 6)), [(24,)]),
    "permute (keras dims)": (lambda t: Permute((2, 1))(t),
                             lambda f, t: f.transpose(t, (0, 2, 1)), [(3, 5)]),
    "permute (flexflow dims)": (lambda t: Permute((0, 2, 1))(t),
                                lambda f, t: f.transpose(t, (0, 2, 1)), [(3, 5)]),
    "batchnorm 4-d": (lambda t: BatchNormalization()(t),
                      lambda f, t: f.batch_norm(t, False, eps=1e-3, momentum=0.01), [(3, 4, 4)]),
    "batchnorm 2-d": (lambda t: BatchNormalization(momentum=0.9, epsilon=1e-5)(t),
                      lambda f, t: f.reshape(f.batch_norm(f.reshape(t, (B, 6, 1, 1)), False,
                                                         eps=1e-5, momentum=0.1), (B, 6)),
                      [(6,)]),
    "concatenate axis 1": (lambda ts: Concatenate(axis=1)(ts),
                           lambda f, ts: f.concat(ts, 1), [(3, 4), (2, 4)]),
    "concatenate axis -1": (lambda ts: Concatenate(axis=-1)(ts),
                            lambda f, ts: f.concat(ts, 2), [(3, 4), (3, 2)]),
    "add three": (lambda ts: Add()(ts), lambda f, ts: f.add(f.add(ts[0], ts[1]), ts[2]),
                  [(5,), (5,), (5,)]),
    "subtract": (lambda ts: Subtract()(ts), lambda f, ts: f.subtract(*ts), [(5,), (5,)]),
    "multiply broadcast": (lambda ts: Multiply()(ts), lambda f, ts: f.multiply(*ts),
                           [(3, 4), (1, 4)]),
    "maximum": (lambda ts: Maximum()(ts), lambda f, ts: f.max(*ts), [(5,), (5,)]),
    "minimum": (lambda ts: Minimum()(ts), lambda f, ts: f.min(*ts), [(5,), (5,)]),
    "batch_dot": (lambda ts: K.batch_dot(*ts), lambda f, ts: f.batch_matmul(*ts),
                  [(3, 4), (4, 2)]),
    "pow": (lambda t: K.pow(t, 2), lambda f, t: f.pow(t, 2), [(5,)]),
    "sum": (lambda t: K.sum(t, axis=2, keepdims=True),
            lambda f, t: f.scalar_multiply(f.mean(t, [2], True), 4.0), [(3, 4)]),
    "exp, rsqrt": (lambda t: K.rsqrt(K.exp(t)), lambda f, t: f.rsqrt(f.exp(t)), [(5,)]),
}
ACTIVATIONS = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "elu": "elu",
               "gelu": "gelu", "linear": "identity"}


@pytest.mark.parametrize("case", CASES)
def test_layer_matches_its_ffmodel_ops(case):
    keras_fn, ff_fn, shapes = CASES[case]
    check_layer(keras_fn, ff_fn, shapes)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_layer(name):
    check_layer(lambda t: Activation(name)(t), lambda f, t: getattr(f, ACTIVATIONS[name])(t),
                [(6,)])


def test_softmax_activation():
    check_layer(lambda t: Activation("softmax")(t), lambda f, t: f.softmax(t), [(3, 6)])


@pytest.mark.parametrize("aggr", ["sum", "avg", None])
def test_embedding(aggr):
    modes = {"sum": AggrMode.AGGR_MODE_SUM, "avg": AggrMode.AGGR_MODE_AVG,
             None: AggrMode.AGGR_MODE_NONE}
    check_layer(lambda t: Embedding(10, 4, input_length=3, aggr=aggr)(t),
                lambda f, t: f.embedding(t, 10, 4, modes[aggr]), [(3,)], dtype="int32",
                pre=False, high=10)


def test_shared_layer_uses_one_set_of_weights():
    """A layer called twice in one model: both calls read the same kernel, and its gradient
    is the sum over both uses (as an FFModel dense with shared_op)."""
    dense = Dense(5)
    check_layer(lambda ts: Add()([dense(ts[0]), dense(ts[1])]),
                lambda f, ts: f.add(f.dense(ts[0], 5),
                                    f.dense(ts[1], 5, shared_op=f.get_layer_by_id(2))),
                [(5,), (5,)])


@pytest.mark.parametrize("make", [lambda **kw: Dense(4, **kw),
                                  lambda **kw: Conv2D(4, kernel_size=1, **kw)])
@pytest.mark.parametrize("option", ["kernel_regularizer", "bias_regularizer",
                                    "activity_regularizer", "kernel_constraint",
                                    "bias_constraint"])
def test_weight_regularizers_and_constraints_are_refused(make, option):
    with pytest.raises(ValueError, match=f"{option}='l2' is not supported"):
        make(**{option: "l2"})
    make(**{option: None})
