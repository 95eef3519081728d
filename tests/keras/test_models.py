"""Model structure: names, get_layer, summary, Sequential construction, nesting, re-applying a
model to a new tensor, shared layers, compile arguments, model weights. Numbers are checked
against NumPy computations from the layers' own weights."""

import numpy as np
import pytest

from flexflow.core import AdamOptimizer, SGDOptimizer
from flexflow.keras import backend, initializers, losses, metrics, optimizers
from flexflow.keras.layers import (Activation, Add, BatchNormalization, Concatenate, Conv2D,
                                   Dense, Dropout, Embedding, Flatten, Input, MaxPooling2D,
                                   Reshape)
from flexflow.keras.models import Model, Sequential

B = 8


def relu(x):
    return np.maximum(x, 0)


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def dense(layer, model, x):
    kernel, bias = layer.get_weights(model.ffmodel)
    return x @ kernel.T + bias


def test_default_names_are_unique_and_given_names_kept():
    layers = [Dense(4), Dense(4), Activation("relu"), Activation("relu"), Dense(4, name="out"),
              Conv2D(2, kernel_size=3), Flatten(), MaxPooling2D()]
    assert [layer.name for layer in layers] == ["dense", "dense_1", "relu", "relu_1", "out",
                                                "conv2d", "flat", "maxpool2d"]


def test_get_layer_by_index_and_name():
    model = Sequential([Dense(6, input_shape=(4,), name="first"), Dense(3)])
    assert model.get_layer(index=1) is model.layers[1]
    assert model.get_layer(name="first") is model.layers[0]
    assert model.get_layer(name="first", index=1) is model.layers[1]  # index wins
    with pytest.raises(ValueError, match="No such layer: nope"):
        model.get_layer(name="nope")
    with pytest.raises(ValueError, match="index 2 but model only has 2 layers"):
        model.get_layer(index=2)
    with pytest.raises(ValueError, match="Provide either a layer name or layer index"):
        model.get_layer()


def test_summary_lists_inputs_and_layers_with_shapes_and_sources():
    inp = Input((1, 8, 8), name="image")
    t = Conv2D(2, kernel_size=(3, 3))(inp)
    model = Model(inp, Dense(3)(Flatten()(t)))
    model.compile("sgd", "sparse_categorical_crossentropy")
    lines = model.summary().splitlines()
    assert lines[0] == "Layer (type)\t\tOutput Shape\t\tInput Shape\tConnected to"
    assert lines[1].split("\t") == ["image (InputLayer)".ljust(25), "(8, 1, 8, 8)", "",
                                    "(8, 1, 8, 8)", ""]
    assert lines[2].split("\t") == ["conv2d (Conv2D)".ljust(25), "(8, 2, 6, 6)", "",
                                    "(8, 1, 8, 8)", "image"]
    assert lines[4].startswith("dense (Dense)") and lines[4].endswith("flat")


def test_summary_prints_the_table_it_returns(capsys):
    model = Sequential([Dense(2, input_shape=(4,))])
    model.compile("sgd", "sparse_categorical_crossentropy")
    capsys.readouterr()
    text = model.summary()
    assert capsys.readouterr().out == text + "\n"
    printed = []
    assert model.summary(print_fn=printed.append) == text and printed == [text]
    assert capsys.readouterr().out == ""


def test_sequential_needs_an_input_shape():
    with pytest.raises(ValueError, match="needs input_shape"):
        Sequential([Dense(3)])
    with pytest.raises(ValueError, match="input_shape \\(2, 3, 4\\) should have 1 dims"):
        Dense(3, input_shape=(2, 3, 4))


def test_layer_shape_errors_name_the_layer():
    inp = Input((10,))
    with pytest.raises(ValueError, match="layer 'conv2d' \\(Conv2D\\) called on input "
                                         "shape\\(s\\) \\(None, 10\\): Conv2D needs 4-d"):
        Conv2D(3, kernel_size=3)(inp)
    with pytest.raises(ValueError, match="cannot reshape 10 elements per sample to \\(3, 4\\)"):
        Reshape((3, 4))(inp)
    with pytest.raises(ValueError, match="must match in every dim but axis 1"):
        Concatenate()([Input((2, 3)), Input((2, 4))])


def test_nested_sequential_equals_its_parts():
    """FlexFlow's nested example: a Sequential CNN ending in Flatten, then a functional MLP."""
    cnn = Sequential([Input((1, 6, 6)), Conv2D(2, kernel_size=(3, 3), activation="relu"),
                      Flatten()])
    inner = Input((32,))
    mlp = Model(inner, Dense(3, activation="softmax")(Dense(5, activation="relu")(inner)))
    model = Sequential()
    model.add(cnn)
    model.add(mlp)
    assert model.layers == cnn.layers + mlp.layers
    model.compile("sgd", "sparse_categorical_crossentropy")
    x = np.random.default_rng(0).random((B, 1, 6, 6), dtype=np.float32)
    conv, _, hidden, out = model.layers
    kernel, bias = conv.get_weights(model.ffmodel)
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
    features = relu(np.einsum("nchwij,ocij->nohw", windows, kernel) + bias[:, None, None])
    expected = softmax(dense(out, model, relu(dense(hidden, model, features.reshape(B, -1)))))
    np.testing.assert_allclose(model.predict(x), expected, rtol=1e-4, atol=1e-6)


def test_model_reapplied_to_a_wider_input():
    """FlexFlow's concat example: sub-models built on Input(256) applied to an Input(784)."""
    subs = []
    for _ in range(2):
        inner = Input((256,))
        subs.append(Model(inner, Dense(4, activation="relu")(Dense(8)(inner))))
    inp = Input((784,))
    model = Model(inp, Dense(3, activation="softmax")(
        Concatenate(axis=1)([sub(inp) for sub in subs])))
    assert len(model.layers) == 2 * 2 + 2
    model.compile("sgd", "sparse_categorical_crossentropy")
    assert model.layers[0].get_weights(model.ffmodel)[0].shape == (8, 784)
    assert model.predict(np.ones((3, 784), np.float32)).shape == (3, 3)
    subs[0].compile("sgd", "sparse_categorical_crossentropy")  # the original still stands
    assert subs[0].layers[0].get_weights(subs[0].ffmodel)[0].shape == (8, 256)


def test_chained_sub_models():
    inp = Input((6,))
    first = Model(inp, Dense(5, activation="relu")(inp))
    inner = Input((5,))
    second = Model(inner, Dense(2, activation="softmax")(inner))
    top = Input((6,))
    model = Model(top, second(first(top)))
    model.compile("sgd", "sparse_categorical_crossentropy")
    x = np.random.default_rng(1).random((B, 6), dtype=np.float32)
    a, b = model.layers
    expected = softmax(dense(b, model, relu(dense(a, model, x))))
    np.testing.assert_allclose(model.predict(x), expected, rtol=1e-5, atol=1e-6)


def test_model_graph_errors():
    a, b = Input((4,)), Input((4,))
    stray = Dense(2)(Input((4,)))
    with pytest.raises(ValueError, match="not one of the model's inputs"):
        Model(a, Add()([Dense(2)(a), stray]))
    with pytest.raises(ValueError, match=r"model input\(s\) \['input_1'\] do not feed any layer"):
        Model([a, b], Dense(2)(a))
    with pytest.raises(ValueError, match="inputs must come from Input"):
        Model(stray, Dense(2)(stray))


def test_layer_without_weight_sharing_called_twice_is_refused_at_compile():
    inp = Input((2, 4, 4))
    norm = BatchNormalization()
    model = Model(inp, Add()([norm(inp), norm(inp)]))
    with pytest.raises(ValueError, match="'batch_normalization' .* is called more than once"):
        model.compile("sgd", "mean_squared_error")


def test_tensor_operators_build_merge_layers():
    a, b = Input((3,)), Input((3,))
    out = (a + b) * a - b
    assert [layer.layer_type for layer in Model([a, b], out).layers] == ["Add", "Multiply",
                                                                         "Subtract"]


def test_compile_accepts_names_and_objects():
    model = Sequential([Dense(3, input_shape=(4,), activation="softmax")])
    model.compile("adam", losses.SparseCategoricalCrossentropy(),
                  ["accuracy", metrics.MeanSquaredError()])
    assert isinstance(model.ffmodel.optimizer, AdamOptimizer)
    assert model.metrics_names == ["loss", "accuracy", "mean_squared_error"]
    model.compile(optimizers.SGD(lr=0.5, momentum=0.5), "categorical_crossentropy")
    assert isinstance(model.ffmodel.optimizer, SGDOptimizer)
    assert (model.ffmodel.optimizer.lr, model.ffmodel.optimizer.momentum) == (0.5, 0.5)
    assert model.label_shape == (3,) and model.label_dtype == "float32"
    for bad, message in [(dict(optimizer="rmsprop", loss="mean_squared_error"), "unknown optim"),
                         (dict(optimizer="sgd", loss="hinge"), "unsupported loss"),
                         (dict(optimizer="sgd", loss="mse", metrics=["auc"]), "unsupported "
                                                                               "metric"),
                         (dict(optimizer="sgd", loss="mse", loss_weights=[1.0]), "loss_weights")]:
        with pytest.raises(ValueError, match=message):
            model.compile(**bad)


def test_initializers_reach_the_weights():
    model = Sequential([Dense(50, input_shape=(40,),
                              kernel_initializer=initializers.RandomNormal(1.0, 0.1, seed=3),
                              bias_initializer=initializers.RandomUniform(2.0, 3.0, seed=4))])
    model.compile("sgd", "mean_squared_error")
    kernel, bias = model.layers[0].get_weights(model.ffmodel)
    assert abs(kernel.mean() - 1.0) < 0.01 and abs(kernel.std() - 0.1) < 0.01
    assert 2.0 <= bias.min() and bias.max() <= 3.0 and bias.std() > 0.1


def test_clear_session_makes_a_second_identical_script_initialise_identically():
    def script():
        model = Sequential([Dense(5, input_shape=(4,), kernel_initializer="random_normal",
                                  bias_initializer="random_uniform")])
        model.compile("sgd", "mean_squared_error")
        return model.get_weights()

    first = script()
    backend.clear_session()
    for got, want in zip(script(), first):
        np.testing.assert_array_equal(got, want)


def test_model_weights_round_trip_and_set_weights_checks():
    model = Sequential([Dense(5, input_shape=(4,)), Dense(2)])
    model.compile("sgd", "mean_squared_error")
    weights = model.get_weights()
    assert [w.shape for w in weights] == [(5, 4), (5,), (2, 5), (2,)]
    changed = [w + 1 for w in weights]
    model.set_weights(changed)
    for got, want in zip(model.get_weights(), changed):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="weight 'kernel' has shape \\(5, 4\\), got an array "
                                         "of shape \\(4, 5\\)"):
        model.layers[0].set_weights(model.ffmodel, weights[0].T, weights[1])
    with pytest.raises(ValueError, match="has 2 weights \\(kernel, bias\\), got 1 arrays"):
        model.layers[0].set_weights(model.ffmodel, weights[0])
    with pytest.raises(ValueError, match="no weights in any compiled model"):
        Dense(3).get_weights()


def test_what_was_broken_upstream_works():
    """FlexFlow r22.07's BatchNormalization, Embedding (initializer), Dropout(seed=...),
    RandomNormal, Concatenate(name=...) and string optimizers failed; here they work."""
    inp = Input((2, 4, 4))
    t = BatchNormalization()(inp)
    t = Flatten()(t)
    t = Concatenate(axis=1, name="joined")([t, Dense(4)(t)])
    model = Model(inp, Dense(3, activation="softmax")(t))
    model.compile("adam", "sparse_categorical_crossentropy")
    assert model.get_layer(name="joined").layer_type == "Concatenate"
    assert model.get_layer(index=0).ffhandle is not None  # batch norm has weights

    ids = Input((3,), dtype="int32")
    embed = Embedding(100, 400, input_length=3)
    seq = Model(ids, Dense(2, activation="softmax")(Dropout(0.5, seed=7)(embed(ids))))
    seq.compile(optimizers.SGD(), "sparse_categorical_crossentropy")
    (table,) = embed.get_weights(seq.ffmodel)
    assert table.shape == (100, 400)
    assert -0.05 <= table.min() < -0.049 and 0.049 < table.max() <= 0.05  # Keras's uniform
    x = np.random.default_rng(0).integers(0, 100, (4 * B, 3)).astype(np.int32)
    seq.fit(x, np.zeros((4 * B, 1), np.int32), verbose=0)
