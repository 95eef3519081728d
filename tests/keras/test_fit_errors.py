"""Wrong inputs to fit (and evaluate/predict) fail before any training step, saying what was
expected."""

import numpy as np
import pytest

from flexflow.core import FFConfig
from flexflow.keras.layers import Concatenate, Dense, Input
from flexflow.keras.models import Model, Sequential

B = 8


def mlp():
    model = Sequential([Dense(3, input_shape=(4,), activation="softmax")])
    model.compile("sgd", "sparse_categorical_crossentropy", ["accuracy"])
    return model


X = np.zeros((4 * B, 4), np.float32)
Y = np.zeros((4 * B, 1), np.int32)


@pytest.mark.parametrize("x, y, message", [
    (np.zeros((4 * B, 5), np.float32), Y,
     r"fit: x \(input 'input'\) must have shape \(num_samples, 4\), got \(32, 5\)"),
    (np.zeros((4 * B, 2, 2), np.float32), Y, r"must have shape \(num_samples, 4\)"),
    (X.astype(np.float64), Y,
     r"x \(input 'input'\) must have dtype float32, got float64 \(convert with "
     r"\.astype\('float32'\)\)"),
    (X.tolist(), Y, "fit: x must be a NumPy or Dask array, or a list of them \\(one per model "
                    "input\\), got a list of list"),
    (X[:, 0], Y, r"x \(input 'input'\) must have shape \(num_samples, 4\), got \(32,\)"),
    (X, Y[:, 0], r"y \(class indices, one per row\) must have shape \(num_samples, 1\), got "
                 r"\(32,\) \(reshape with y.reshape\(-1, 1\)\)"),
    (X, np.zeros((4 * B, 3), np.int32), r"y .* must have shape \(num_samples, 1\), got "
                                        r"\(32, 3\)"),
    (X, Y.astype(np.int64), "y .* must have dtype int32, got int64"),
    (X, Y + 3, r"labels must be class indices in \[0, 3\) for a model with 3 outputs, got "
               r"values from 3 to 3"),
    (X, Y[:-1], r"x and y must have the same number of samples, got \[32\] for x and 31 for y"),
    (X[:B - 1], Y[:B - 1], "7 samples is fewer than one batch of 8 \\(the batch size set "
                           "with -b\\)"),
    ([X, X], Y, r"the model has 1 input\(s\) \(input\), got 2 array\(s\) for x"),
    (X, None, r"y \(the labels\) is missing"),
])
def test_fit_rejects(x, y, message):
    model = mlp()
    before = model.get_weights()
    with pytest.raises((ValueError, TypeError), match=message):
        model.fit(x, y, verbose=0)
    for a, b in zip(before, model.get_weights()):  # no training happened
        np.testing.assert_array_equal(a, b)


def test_batch_size_must_match_the_b_flag():
    with pytest.raises(ValueError, match=r"fit: batch_size=32 does not match the model's batch "
                                         r"size 8; .* -b flag \(run the script with -b 32\)"):
        mlp().fit(X, Y, batch_size=32, verbose=0)
    mlp().fit(X, Y, batch_size=B, verbose=0)  # the same size is fine
    with pytest.raises(ValueError, match="evaluate: batch_size=16 does not match"):
        mlp().evaluate(X, Y, batch_size=16)


def test_categorical_labels_have_the_output_shape():
    model = Sequential([Dense(3, input_shape=(4,), activation="softmax")])
    model.compile("sgd", "categorical_crossentropy")
    with pytest.raises(ValueError, match=r"y must have shape \(num_samples, 3\), got \(32, 1\)"):
        model.fit(X, Y.astype(np.float32), verbose=0)


def test_each_input_of_a_multi_input_model_is_checked():
    a, b = Input((4,), name="left"), Input((2,), name="right")
    model = Model([a, b], Dense(3, activation="softmax")(Concatenate()([a, b])),
                  ffconfig=FFConfig(argv=[], batch_size=B))
    model.compile("sgd", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"x\[1\] \(input 'right'\) must have shape "
                                         r"\(num_samples, 2\), got \(32, 4\)"):
        model.fit([X, X], Y, verbose=0)


def test_other_wrong_arguments():
    model = mlp()
    with pytest.raises(ValueError, match="validation_data must be a tuple"):
        model.fit(X, Y, validation_data=X, verbose=0)
    with pytest.raises(ValueError, match=r"validation_data\): x .* got \(32, 5\)"):
        model.fit(X, Y, validation_data=(np.zeros((4 * B, 5), np.float32), Y), verbose=0)
    with pytest.raises(ValueError, match="validation_split=0.9 leaves 3 training and 29 "
                                         "validation samples"):
        model.fit(X, Y, validation_split=0.9, verbose=0)
    with pytest.raises(ValueError, match="class_weight is not supported"):
        model.fit(X, Y, class_weight={0: 1.0}, verbose=0)
    with pytest.raises(RuntimeError, match=r"fit\(\) needs a compiled model"):
        Sequential([Dense(3, input_shape=(4,))]).fit(X, Y)
    with pytest.raises(ValueError, match=r"predict: x .* must have shape \(num_samples, 4\)"):
        model.predict(np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match="train_on_batch: x and y must hold exactly one batch "
                                         "of 8 samples"):
        model.train_on_batch(X, Y)
