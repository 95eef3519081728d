"""fit, evaluate and predict beyond FlexFlow: History, validation, shuffling, predict,
evaluate's return values, train_on_batch, the callbacks (FlexFlow's and Keras's), weight files and
the progress output. Expected values come from NumPy computations on the model's own weights or
from re-running the same steps by other calls."""

import io
import sys

import numpy as np
import pytest

from flexflow.core import FFConfig
from flexflow.keras.callbacks import (Callback, EarlyStopping, EpochVerifyMetrics,
                                      LearningRateScheduler, ModelCheckpoint, VerifyMetrics)
from flexflow.keras.layers import Dense, Dropout
from flexflow.keras.models import Sequential
from flexflow.keras.optimizers import SGD
from flexflow.keras.utils import Progbar

B = 8
FEATURES, CLASSES = 6, 3


def make_model(seed=0, dropout=0.0, lr=0.2):
    model = Sequential([Dense(16, input_shape=(FEATURES,), activation="relu"),
                        Dropout(dropout), Dense(CLASSES, activation="softmax")],
                       ffconfig=FFConfig(argv=["--seed", str(seed)], batch_size=B))
    model.compile(SGD(learning_rate=lr), "sparse_categorical_crossentropy", ["accuracy"])
    return model


def data(n=10 * B, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    y = (x[:, :CLASSES].argmax(axis=1)).astype(np.int32).reshape(-1, 1)
    return x, y


def numpy_forward(model, x):
    (k1, b1), (k2, b2) = (model.layers[i].get_weights(model.ffmodel) for i in (0, 2))
    logits = np.maximum(x @ k1.T + b1, 0) @ k2.T + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_predict_is_the_inference_forward_of_every_sample():
    model = make_model(dropout=0.5)
    x, _ = data(n=B + 3)  # not a multiple of the batch: the last batch is padded
    predicted = model.predict(x)
    assert predicted.shape == (B + 3, CLASSES)
    np.testing.assert_allclose(predicted, numpy_forward(model, x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.predict_on_batch(x[:B]), predicted[:B], rtol=1e-6)


def test_evaluate_returns_loss_and_metrics_over_whole_batches():
    model = make_model()
    x, y = data(n=3 * B + 5)
    loss, accuracy = model.evaluate(x, y, verbose=0)
    probs = numpy_forward(model, x[:3 * B])  # the last 5 samples do not fill a batch
    labels = y[:3 * B, 0]
    assert loss == pytest.approx(-np.log(probs[np.arange(3 * B), labels]).mean(), rel=1e-5)
    assert accuracy == pytest.approx((probs.argmax(axis=1) == labels).mean())
    assert model.evaluate(x, y, verbose=0, return_dict=True) == {"loss": loss,
                                                                 "accuracy": accuracy}


def test_history_and_validation_data_match_evaluate():
    model = make_model()
    x, y = data()
    x_val, y_val = data(n=4 * B, seed=1)
    history = model.fit(x, y, epochs=3, validation_data=(x_val, y_val), verbose=0)
    assert history.epoch == [0, 1, 2]
    assert set(history.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert history.history["loss"][-1] < history.history["loss"][0]
    val_loss, val_accuracy = model.evaluate(x_val, y_val, verbose=0)
    assert history.history["val_loss"][-1] == pytest.approx(val_loss, rel=1e-6)
    assert history.history["val_accuracy"][-1] == pytest.approx(val_accuracy)
    assert model.history is history


def test_validation_split_holds_out_the_last_samples():
    x, y = data(n=10 * B)
    model = make_model()
    history = model.fit(x, y, epochs=1, validation_split=0.2, shuffle=False, verbose=0)
    assert history.history["val_loss"][0] == pytest.approx(
        model.evaluate(x[8 * B:], y[8 * B:], verbose=0)[0], rel=1e-6)
    # the first 80% alone, trained the same way, ends with the same weights
    other = make_model()
    other.fit(x[:8 * B], y[:8 * B], epochs=1, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), other.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_batch_logs_are_per_batch_and_epoch_logs_their_mean():
    class Record(Callback):
        def on_train_begin(self, logs=None):
            self.batches = []

        def on_batch_end(self, batch, logs=None):
            self.batches.append(dict(logs))

    record = Record()
    model = make_model()
    x, y = data()
    history = model.fit(x, y, epochs=1, callbacks=[record], verbose=0)
    assert [b["batch"] for b in record.batches] == list(range(10))
    assert all(b["size"] == B for b in record.batches)
    assert history.history["loss"][0] == pytest.approx(
        np.mean([b["loss"] for b in record.batches]), rel=1e-6)
    assert history.history["accuracy"][0] == pytest.approx(
        np.mean([b["accuracy"] for b in record.batches]))


def test_keras_s_batch_and_test_hooks_are_called():
    """on_train_batch_* (Keras's names; on_batch_* still work), and on_test_* for fit's
    validation and for evaluate, each with its batch's logs."""
    class Record(Callback):
        def __init__(self):
            super().__init__()
            self.calls = []

        def on_train_batch_end(self, batch, logs=None):
            self.calls.append(("train", batch, round(logs["loss"], 6)))

        def on_test_begin(self, logs=None):
            self.calls.append(("test begin",))

        def on_test_batch_begin(self, batch, logs=None):
            self.calls.append(("test batch", batch))

        def on_test_batch_end(self, batch, logs=None):
            self.calls.append(("test batch end", batch, logs["size"]))

        def on_test_end(self, logs=None):
            self.calls.append(("test end", round(logs["loss"], 6)))

    record = Record()
    model = make_model()
    x, y = data()
    history = model.fit(x, y, epochs=1, callbacks=[record], validation_split=0.2, verbose=0)
    trained = [call for call in record.calls if call[0] == "train"]
    assert [call[1] for call in trained] == list(range(8))
    tested = [call for call in record.calls if call[0] != "train"]
    assert tested == [("test begin",), ("test batch", 0), ("test batch end", 0, B),
                      ("test batch", 1), ("test batch end", 1, B),
                      ("test end", round(history.history["val_loss"][0], 6))]
    again = Record()
    loss = model.evaluate(x[8 * B:], y[8 * B:], verbose=0, callbacks=[again])[0]
    assert again.calls[0] == ("test begin",) and again.calls[-1] == ("test end", round(loss, 6))


def test_fit_takes_dask_arrays_and_memmaps_as_numpy_arrays(tmp_path):
    import dask.array as da
    x, y = data()
    reference = make_model().fit(x, y, epochs=2, verbose=0).history
    lazy = make_model().fit(da.from_array(x, chunks=(16, FEATURES)), da.from_array(y),
                            epochs=2, verbose=0).history
    mapped = np.lib.format.open_memmap(tmp_path / "x.npy", "w+", np.float32, x.shape)
    mapped[:] = x
    on_disk = make_model().fit(mapped, y, epochs=2, verbose=0).history
    assert lazy == reference and on_disk == reference


def test_shuffle_is_seeded():
    x, y = data()

    def losses(seed, shuffle):
        return make_model(seed=0 if seed is None else seed).fit(
            x, y, epochs=2, shuffle=shuffle, verbose=0).history["loss"]

    # one model (weights from --seed 0); the data order comes from --seed as well
    assert losses(0, True) == losses(0, True)
    assert losses(0, True) != losses(0, False)
    model_a, model_b = make_model(seed=0), make_model(seed=0)
    model_b.ffconfig.seed = 5  # same weights, another shuffling order
    run_a = model_a.fit(x, y, epochs=2, verbose=0).history["loss"]
    run_b = model_b.fit(x, y, epochs=2, verbose=0).history["loss"]
    assert run_a != run_b


def test_train_on_batch_equals_a_fit_step():
    x, y = data(n=B)
    a, b = make_model(), make_model()
    loss, accuracy = a.train_on_batch(x, y)
    history = b.fit(x, y, epochs=1, shuffle=False, verbose=0)
    assert loss == pytest.approx(history.history["loss"][0], rel=1e-6)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)
    assert a.test_on_batch(x, y) == pytest.approx(a.evaluate(x, y, verbose=0))


def test_save_and_load_weights(tmp_path):
    model = make_model()
    x, y = data()
    model.fit(x, y, epochs=1, verbose=0)
    path = model.save_weights(tmp_path / "weights")
    assert path.name == "weights.npz"
    with np.load(path, allow_pickle=False) as archive:
        assert str(archive["__format__"]) == "flexflow.keras.weights/1"
        assert list(archive["__layers__"]) == ["dense", "dense_1"]
        assert sorted(archive.files) == ["__format__", "__layers__", "dense/bias",
                                         "dense/kernel", "dense_1/bias", "dense_1/kernel"]
    fresh = make_model(seed=7)  # its layers are named dense_2, dense_3: matched by order
    fresh.load_weights(tmp_path / "weights.npz")
    np.testing.assert_array_equal(fresh.predict(x), model.predict(x))
    with pytest.raises(ValueError, match=r"no weights for layer\(s\) \['dense_2', 'dense_3'\]"):
        fresh.load_weights(path, by_name=True)

    narrower = Sequential([Dense(8, input_shape=(FEATURES,)), Dense(CLASSES)])
    narrower.compile("sgd", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match="'dense/kernel' has shape \\(16, 6\\), layer "
                                         "'dense_4' expects \\(8, 6\\)"):
        narrower.load_weights(path)
    deeper = Sequential([Dense(8, input_shape=(FEATURES,)), Dense(8), Dense(CLASSES)])
    deeper.compile("sgd", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match="holds weights of 2 layers, the model has 3"):
        deeper.load_weights(path)
    with pytest.raises(FileNotFoundError, match="no weights file"):
        fresh.load_weights(tmp_path / "missing.npz")
    with pytest.raises(ValueError, match="HDF5"):
        model.save_weights(tmp_path / "w.h5")


def test_model_checkpoint_saves_each_epoch_or_the_best(tmp_path):
    model = make_model()
    x, y = data()
    checkpoint = ModelCheckpoint(str(tmp_path / "w-{epoch:02d}-{loss:.3f}.npz"), monitor="loss")
    history = model.fit(x, y, epochs=2, callbacks=[checkpoint], verbose=0)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"w-{e + 1:02d}-{loss:.3f}.npz"
                     for e, loss in enumerate(history.history["loss"])]
    best = ModelCheckpoint(str(tmp_path / "best.npz"), monitor="val_loss", save_best_only=True)
    with pytest.raises(ValueError, match="monitors 'val_loss', which fit does not report"):
        model.fit(x, y, epochs=1, callbacks=[best], verbose=0)
    model.fit(x, y, epochs=2, validation_data=(x, y), callbacks=[best], verbose=0)
    assert (tmp_path / "best.npz").is_file()


def test_early_stopping_restores_the_best_weights():
    model = make_model(lr=0.05)
    x, y = data()
    snapshots = []

    class Snapshot(Callback):
        def on_epoch_end(self, epoch, logs=None):
            snapshots.append(self.model.get_weights())

    # improvements must exceed 10: only the first epoch counts as one
    stop = EarlyStopping(monitor="loss", min_delta=10, patience=1, restore_best_weights=True)
    history = model.fit(x, y, epochs=10, callbacks=[Snapshot(), stop], verbose=0)
    assert history.epoch == [0, 1, 2]
    assert stop.stopped_epoch == 2
    for got, want in zip(model.get_weights(), snapshots[0]):
        np.testing.assert_array_equal(got, want)


def test_flexflow_callbacks(capsys):
    model = make_model()
    x, y = data(n=20 * B)
    schedule = LearningRateScheduler(lambda epoch: 0.3 if epoch == 0 else 0.1)
    model.fit(x, y, epochs=2, callbacks=[schedule, VerifyMetrics(0)], verbose=0)
    assert model.ffmodel.optimizer.lr == 0.1
    out = capsys.readouterr().out
    assert "set learning rate  0.3\n" in out and "set learning rate  0.1\n" in out

    history = model.fit(x, y, epochs=5, callbacks=[EpochVerifyMetrics(1)], verbose=0)
    assert history.epoch == [0]
    assert "Accuracy reaches, now early stop, epoch: 0" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="Accuracy is wrong"):
        model.fit(x, y, epochs=1, callbacks=[VerifyMetrics(100.5)], verbose=0)
    with pytest.raises(ValueError, match="should be a float"):
        model.fit(x, y, callbacks=[LearningRateScheduler(lambda e: "fast")], verbose=0)


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_output_on_a_terminal_and_in_a_log(monkeypatch, capsys):
    x, y = data()
    model = make_model()
    capsys.readouterr()
    model.fit(x, y, epochs=2, verbose=1)
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "Epoch 1/2" and lines[2] == "Epoch 2/2"
    assert lines[1].startswith("10/10 - ") and "ms/step - loss: " in lines[1]
    assert "accuracy: " in lines[1] and lines[1].endswith("samples/s")
    assert "\r" not in captured.out
    assert lines[4].startswith("epochs 2, ELAPSED TIME = ")
    assert "interations 20, samples 160, THROUGHPUT = " in lines[4]
    assert captured.err.count("[Metrics] accuracy: ") == 2

    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    model.fit(x, y, epochs=1, verbose=1)
    text = terminal.getvalue()
    assert "\r10/10 [==============================] - " in text
    assert "samples/s\n" in text


def test_progbar_redraws_in_place_on_a_terminal():
    terminal = FakeTerminal()
    bar = Progbar(4, 16, terminal, redraw_every_s=0)
    bar.update(1, {"loss": 1.5})
    bar.update(2, {"loss": 1.25})
    bar.finish({"loss": 1.0, "val_loss": 0.00012})
    text = terminal.getvalue()
    assert text.startswith("\r1/4 [=======>......................] - ETA: ")
    assert "\r2/4 [===============>..............] - ETA: " in text
    assert " - loss: 1.2500 - " in text
    assert text.rstrip().split("\r")[-1].startswith("4/4 [==============================] - ")
    assert " - loss: 1.0000 - val_loss: 1.2000e-04 - " in text
    plain = io.StringIO()
    bar = Progbar(4, 16, plain)
    bar.update(1, {"loss": 1.5})
    bar.finish({"loss": 1.0})
    assert plain.getvalue().count("\n") == 1 and plain.getvalue().startswith("4/4 - ")
