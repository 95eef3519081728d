"""Keras checkpoints: ModelCheckpoint(save_weights_only=False) writes full checkpoints, and
load_weights reads them as well as weights files. The oracle is the uninterrupted fit of the same
script: resuming from a checkpoint must give its per-batch losses."""

import numpy as np
import pytest

from flexflow.core import CheckpointError, FFConfig
from flexflow.keras import backend
from flexflow.keras.callbacks import Callback, LearningRateScheduler, ModelCheckpoint
from flexflow.keras.layers import BatchNormalization, Dense, Dropout
from flexflow.keras.models import Sequential
from flexflow.keras.optimizers import SGD, Adam

B, FEATURES, CLASSES, EPOCHS = 8, 6, 3, 3
OPTIMIZERS = {"sgd": lambda: SGD(learning_rate=0.1, momentum=0.9),
              "adam": lambda: Adam(learning_rate=0.01)}


def make_model(optimizer):
    """The same script each time: default layer names start afresh, as in a new process."""
    backend.clear_session()
    model = Sequential([Dense(16, input_shape=(FEATURES,), activation="relu"),
                        BatchNormalization(), Dropout(0.3),
                        Dense(CLASSES, activation="softmax")],
                       ffconfig=FFConfig(argv=[], batch_size=B))
    model.compile(OPTIMIZERS[optimizer](), "sparse_categorical_crossentropy", ["accuracy"])
    return model


def data(n=4 * B):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    return x, x[:, :CLASSES].argmax(axis=1).astype(np.int32).reshape(-1, 1)


class BatchLosses(Callback):
    def __init__(self):
        super().__init__()
        self.losses = []

    def on_batch_end(self, batch, logs=None):
        self.losses.append(logs["loss"])


def fit(model, callbacks=(), **kwargs):
    losses = BatchLosses()
    x, y = data()
    model.fit(x, y, epochs=EPOCHS, verbose=0, callbacks=[losses, *callbacks], **kwargs)
    return losses.losses


def full_checkpoints(path):
    return ModelCheckpoint(str(path), save_weights_only=False)


def schedule(epoch):
    return 0.01 / (1 + epoch)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_model_checkpoint_then_load_weights_resumes_the_same_losses(optimizer, tmp_path):
    reference = fit(make_model(optimizer))
    stopped = make_model(optimizer)

    class StopAfterFirstEpoch(Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.stop_training = True
    first = fit(stopped, [full_checkpoints(tmp_path / "ckpt-{epoch}"), StopAfterFirstEpoch()])
    resumed = make_model(optimizer)
    resumed.load_weights(tmp_path / "ckpt-1")
    rest = fit(resumed, initial_epoch=1)
    assert len(first) == len(rest) / 2 == len(reference) / EPOCHS
    np.testing.assert_array_equal(first + rest, reference)


def test_a_scheduled_learning_rate_resumes_too(tmp_path):
    reference = fit(make_model("adam"), [LearningRateScheduler(schedule)])
    fit(make_model("adam"), [LearningRateScheduler(schedule),
                             full_checkpoints(tmp_path / "ckpt-{epoch}")])
    resumed = make_model("adam")
    resumed.load_weights(tmp_path / "ckpt-2")
    assert resumed.optimizer.lr == schedule(1)
    rest = fit(resumed, [LearningRateScheduler(schedule)], initial_epoch=2)
    np.testing.assert_array_equal(rest, reference[-len(rest):])


def test_weights_files_by_default_and_load_weights_reads_both_kinds(tmp_path):
    model = make_model("sgd")
    fit(model, [ModelCheckpoint(str(tmp_path / "weights")),
                full_checkpoints(tmp_path / "full.npz")])
    with np.load(tmp_path / "weights.npz", allow_pickle=False) as archive:
        assert str(archive["__format__"]) == "flexflow.keras.weights/1"
    with np.load(tmp_path / "full.npz", allow_pickle=False) as archive:
        assert "__checkpoint__" in archive.files and "__format__" not in archive.files
    x, _ = data()
    for name in ("weights.npz", "full.npz"):
        fresh = make_model("sgd")
        fresh.load_weights(tmp_path / name)
        np.testing.assert_array_equal(fresh.predict(x), model.predict(x))


def test_load_weights_refuses_a_checkpoint_of_another_model(tmp_path):
    fit(make_model("sgd"), [full_checkpoints(tmp_path / "ckpt")])
    backend.clear_session()
    other = Sequential([Dense(8, input_shape=(FEATURES,)), Dense(CLASSES)],
                       ffconfig=FFConfig(argv=[], batch_size=B))
    other.compile(SGD(momentum=0.9), "sparse_categorical_crossentropy")
    with pytest.raises(CheckpointError, match=r"ckpt: holds weight 0 of layer "
                                              r"'batch_normalization_\d+'"):
        other.load_weights(tmp_path / "ckpt")
