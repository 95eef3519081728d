"""Data sets stay on the workers (scheduler/feeds.py, scheduler/kept_data.py): a data loader's
array, and the arrays Keras `fit` trains on, are placed on the workers once, and each batch then
travels as its rows, with the same training as batches fed one by one."""

import asyncio
import gc
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from flexflow import keras
from flexflow.core import ActiMode, DataType, FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.scheduler import cluster as cluster_module
from flexflow.scheduler import kept_data

from .cluster import loopback_cluster

BATCH, SAMPLES, STEPS = 8, 48, 8


@pytest.fixture(scope="module")
def scheduler_address():
    with loopback_cluster(workers=2) as address:
        yield address
        cluster_module.disconnect(address)


def data():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((SAMPLES, 12)).astype(np.float32),
            rng.integers(0, 4, (SAMPLES, 1)).astype(np.int32))


def mlp(argv):
    ff = FFModel(FFConfig(argv=argv, batch_size=BATCH))
    x = ff.create_tensor([BATCH, 12], DataType.DT_FLOAT)
    ff.softmax(ff.dense(ff.dense(x, 16, ActiMode.AC_MODE_RELU), 4))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.1, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff, x


def loader_losses(argv) -> tuple[list[float], FFModel]:
    ff, x = mlp(argv)
    xs, ys = data()
    loaders = [ff.create_data_loader(x, xs), ff.create_data_loader(ff.label_tensor, ys)]
    losses = []
    for _ in range(STEPS):  # past the end of the data: the loaders wrap around
        for loader in loaders:
            loader.next_batch(ff)
        losses.append(ff.train_step())
    return losses, ff


def fed_losses(argv) -> list[float]:
    ff, x = mlp(argv)
    xs, ys = data()
    losses = []
    for step in range(STEPS):
        rows = slice(step * BATCH % SAMPLES, step * BATCH % SAMPLES + BATCH)
        x.set_tensor(ff, xs[rows])
        ff.label_tensor.set_tensor(ff, ys[rows])
        losses.append(ff.train_step())
    return losses


def count_scatters(monkeypatch, executor) -> list:
    """(shape, workers) of what the executor scatters (through cluster.watched_scatter, which
    calls the client's coroutine once per worker)."""
    calls = []
    scatter = executor.client._scatter
    monkeypatch.setattr(executor.client, "_scatter",
                        lambda data, **kw: calls.append((np.shape(data), tuple(kw["workers"])))
                        or scatter(data, **kw))
    return calls


def test_a_loader_s_data_is_placed_once_and_trains_as_fed_batches(scheduler_address,
                                                                   monkeypatch):
    argv = ["--scheduler", scheduler_address, "-ll:gpu", "2"]
    ff, x = mlp(argv)
    calls = count_scatters(monkeypatch, ff.compiled.executor)
    xs, ys = data()
    loaders = [ff.create_data_loader(x, xs), ff.create_data_loader(ff.label_tensor, ys)]
    losses = []
    for _ in range(STEPS):
        for loader in loaders:
            loader.next_batch(ff)
        losses.append(ff.train_step())
    workers = ff.compiled.executor.workers
    # each data set once, a copy for each of its readers
    assert sorted(calls) == sorted((a.shape, (w,)) for a in (xs, ys) for w in workers)
    np.testing.assert_allclose(losses, fed_losses(argv), rtol=1e-6)
    np.testing.assert_allclose(losses, fed_losses([]), rtol=1e-5)  # in this process


def test_a_data_set_too_large_to_keep_travels_batch_by_batch(scheduler_address, monkeypatch):
    monkeypatch.setattr(kept_data, "KEPT_SHARE", 1e-12)
    argv = ["--scheduler", scheduler_address, "-ll:gpu", "2"]
    losses, ff = loader_losses(argv)
    assert ff.compiled.executor._kept.placed == {}
    np.testing.assert_allclose(losses, fed_losses(argv), rtol=1e-6)


def keras_model(argv):
    keras.backend.clear_session()
    model = keras.models.Sequential(
        [keras.layers.Dense(16, activation="relu", input_shape=(12,)),
         keras.layers.Dense(4, activation="softmax")],
        ffconfig=FFConfig(argv=argv, batch_size=BATCH))
    model.compile(keras.optimizers.SGD(learning_rate=0.1), "sparse_categorical_crossentropy",
                  ["accuracy"])
    return model


@pytest.mark.parametrize("shuffle", [True, False])
def test_keras_fit_keeps_its_arrays_on_the_workers_for_the_fit(scheduler_address, shuffle):
    xs, ys = data()
    histories = []
    for argv in (["--scheduler", scheduler_address, "-ll:gpu", "2"], []):
        model = keras_model(argv)
        history = model.fit(xs, ys, epochs=2, shuffle=shuffle, validation_split=1 / 3,
                            verbose=0)
        histories.append(history.history)
        if argv:
            gc.collect()
            assert model.ffmodel.compiled.executor._kept.placed == {}  # released after fit
    for key in histories[1]:
        np.testing.assert_allclose(histories[0][key], histories[1][key], rtol=1e-5)


async def _hold_the_replication_lock(dask_scheduler, seconds):
    """What a replication that retries a dead worker does: hold the scheduler's replica lock."""
    async def hold():
        async with dask_scheduler._replica_lock(("held by a test", object())):
            await asyncio.sleep(seconds)
    dask_scheduler._held_by_test = asyncio.ensure_future(hold())


def test_uploads_do_not_wait_behind_a_stuck_replication(scheduler_address):
    """Dask's replication (a scatter with broadcast) holds a scheduler-wide lock, and retries a
    worker that died during it for ever: every later broadcast waited behind it (a fault-matrix
    run hung so). An upload is a copy scattered to each worker on its own."""
    cluster = cluster_module.connect(scheduler_address, 2)
    cluster.client.run_on_scheduler(_hold_the_replication_lock, seconds=30)
    array = np.arange(1000.0)
    with ThreadPoolExecutor(1) as pool:
        upload = pool.submit(cluster_module.watched_scatter, cluster.client, array,
                             cluster.workers, "a test upload")
        copies = upload.result(timeout=15)
    assert sorted(copies) == sorted(cluster.workers)
    for worker, future in copies.items():
        assert cluster.client.who_has([future])[future.key] == (worker,)
        np.testing.assert_array_equal(future.result(), array)
