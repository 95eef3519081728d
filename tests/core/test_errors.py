"""Bad models and bad data fail before any work starts, naming the layer or tensor and the
shapes involved."""

import numpy as np
import pytest

from flexflow.core import (ActiMode, AdamOptimizer, DataType, FFConfig, FFModel, LossType,
                           MetricsType, SGDOptimizer, ShapeError)
from flexflow.keras import optimizers as keras_optimizers


def model(batch=8):
    return FFModel(FFConfig(argv=[], batch_size=batch))


def test_concat_mismatch_names_layer_and_shapes():
    ff = model()
    a = ff.create_tensor([8, 3, 10, 10])
    b = ff.create_tensor([8, 3, 12, 10])
    with pytest.raises(ShapeError) as error:
        ff.concat([a, b], 1, name="merge")
    message = str(error.value)
    assert "merge" in message and "(8, 3, 10, 10)" in message and "(8, 3, 12, 10)" in message


def test_add_of_incompatible_shapes():
    ff = model()
    a = ff.create_tensor([8, 5])
    b = ff.create_tensor([8, 6])
    with pytest.raises(ShapeError, match=r"Add.*\(8, 5\).*\(8, 6\)"):
        ff.add(a, b)


def test_conv_on_a_2d_tensor():
    ff = model()
    x = ff.create_tensor([8, 784])
    with pytest.raises(ShapeError, match=r"conv1.*\(8, 784\)"):
        ff.conv2d(x, 4, 3, 3, 1, 1, 0, 0, name="conv1")


def test_reshape_with_wrong_element_count():
    ff = model()
    x = ff.create_tensor([8, 12])
    with pytest.raises(ShapeError, match=r"\(8, 5\)"):
        ff.reshape(x, [8, 5])


def test_input_batch_must_match_the_configured_batch():
    ff = model(batch=8)
    x = ff.create_tensor([16, 4])
    ff.softmax(ff.dense(x, 3))
    with pytest.raises(ShapeError, match=r"batch size 8.*-b"):
        ff.compile(optimizer=SGDOptimizer(ff), loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)


def compiled_mlp():
    ff = model()
    x = ff.create_tensor([8, 4])
    ff.softmax(ff.dense(x, 3, ActiMode.AC_MODE_RELU))
    ff.compile(optimizer=SGDOptimizer(ff), loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY])
    return ff, x


MISUSES = {
    "loader array of the wrong shape": (
        lambda ff, x: ff.create_data_loader(x, np.zeros((100, 5), np.float32)),
        ShapeError, r"\(8, 4\).*\(100, 5\)|\(4,\).*\(100, 5\)"),
    "loader array of the wrong dtype": (
        lambda ff, x: ff.create_data_loader(x, np.zeros((100, 4), np.float64)),
        ShapeError, "float32.*float64"),
    "label loader array of the wrong dtype": (
        lambda ff, x: ff.create_data_loader(ff.label_tensor, np.zeros((100, 1), np.float32)),
        ShapeError, "label.*int32.*float32"),
    "set_tensor of the wrong shape": (
        lambda ff, x: x.set_tensor(ff, np.zeros((8, 3), np.float32)),
        ShapeError, r"\(8, 4\).*\(8, 3\)"),
    "training without data": (lambda ff, x: ff.forward(), RuntimeError, "no data for input tensor"),
    "set_weights of the wrong shape": (
        lambda ff, x: ff.get_layer_by_id(0).get_weight_tensor().set_weights(
            ff, np.zeros((4, 3), np.float32)),
        ShapeError, r"\(3, 4\).*\(4, 3\)"),
}


@pytest.mark.parametrize("misuse", list(MISUSES))
def test_misuse_of_a_compiled_model_says_what_is_wrong(misuse):
    call, error, message = MISUSES[misuse]
    ff, x = compiled_mlp()
    with pytest.raises(error, match=message):
        call(ff, x)


def test_labels_out_of_range_are_reported():
    ff, x = compiled_mlp()
    x.set_tensor(ff, np.zeros((8, 4), np.float32))
    ff.label_tensor.set_tensor(ff, np.full((8, 1), 7, np.int32))
    with pytest.raises(ValueError, match=r"\[0, 3\).*7"):
        ff.train_step()


def test_unknown_data_type():
    with pytest.raises(ShapeError, match="data type"):
        model().create_tensor([8, 4], DataType.DT_NONE)


def test_mapping_an_unfed_input_gives_zeros_to_fill_in():
    ff, x = compiled_mlp()
    label = ff.label_tensor
    label.inline_map(ff.ffconfig)
    array = label.get_array(ff.ffconfig)
    assert array.shape == (8, 1) and not array.any()
    array[:] = 2
    label.inline_unmap(ff.ffconfig)
    np.testing.assert_array_equal(label.get_tensor(ff), np.full((8, 1), 2, np.int32))


def test_fit_refuses_x_and_y_loaders_of_different_lengths_before_training():
    ff, x = compiled_mlp()
    before = ff.get_layer_by_id(0).get_weight_tensor().get_weights(ff)
    x_loader = ff.create_data_loader(x, np.ones((32, 4), np.float32))
    y_loader = ff.create_data_loader(ff.label_tensor, np.zeros((24, 1), np.int32))
    with pytest.raises(ShapeError, match=r"fit\(\): .*x\[0\] has 32, y has 24"):
        ff.fit(x=x_loader, y=y_loader, epochs=1)
    np.testing.assert_array_equal(ff.get_layer_by_id(0).get_weight_tensor().get_weights(ff),
                                  before)


REFUSED_RATES = {
    "SGD negative": lambda: SGDOptimizer(None, -0.01),
    "Adam nan": lambda: AdamOptimizer(None, alpha=float("nan")),
    "SGD set inf": lambda: SGDOptimizer(None).set_learning_rate(float("inf")),
    "Adam set negative": lambda: AdamOptimizer(None).set_learning_rate(-1),
    "Keras SGD negative": lambda: keras_optimizers.SGD(learning_rate=-1e-3),
    "Keras Adam lr inf": lambda: keras_optimizers.Adam(lr=float("inf")),
    "Keras set negative": lambda: keras_optimizers.SGD().set_learning_rate(-0.5),
}


@pytest.mark.parametrize("case", list(REFUSED_RATES))
def test_negative_or_non_finite_learning_rates_are_refused(case):
    with pytest.raises(ValueError, match="learning rate must be a finite number >= 0"):
        REFUSED_RATES[case]()
