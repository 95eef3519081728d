"""Training survives a worker killed mid-run: a real cluster of 3 worker processes, one killed
(worker and its nanny, so it does not come back) while an iteration runs, at a random iteration
of a 2-epoch fit. The run goes on on the 2 that remain and ends with the uninterrupted run's
weights and per-iteration metrics: no iteration lost, none counted twice."""

import os
import random
import signal
import threading

import numpy as np
import pytest

from flexflow.core import (ActiMode, DataType, FFConfig, FFModel, LossType, MetricsType,
                           SGDOptimizer)
from flexflow.recovery import ClusterLost, WorkerLostWarning
from flexflow.scheduler import cluster as cluster_module
from flexflow.scheduler.distributed import DaskExecutor

from .cluster import loopback_cluster
from .faults import strike, worker_processes
from .training import all_weights, metric_lines, numbers

BATCH, SAMPLES, EPOCHS = 12, 96, 2  # 8 iterations an epoch; 12 splits over 3 devices and 2


def build_and_fit(argv, capsys, epoch_begin=None):
    """A 2-epoch fit of an MLP with dropout; its weights and the printed metric lines. With
    `epoch_begin`, one fit per epoch, `epoch_begin(ff, epoch)` called before each."""
    ff = FFModel(FFConfig(argv=argv + ["--recovery-interval", "3"], batch_size=BATCH,
                          epochs=EPOCHS))
    x = ff.create_tensor([BATCH, 10], DataType.DT_FLOAT)
    t = ff.dense(x, 32, ActiMode.AC_MODE_RELU)
    t = ff.dropout(t, 0.25, seed=7)
    ff.softmax(ff.dense(t, 4))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.05, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY,
                        MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
    rng = np.random.default_rng(0)
    images = rng.standard_normal((SAMPLES, 10)).astype(np.float32)
    labels = (images[:, :4].argmax(1)).astype(np.int32).reshape(-1, 1)
    capsys.readouterr()
    loaders = dict(x=ff.create_data_loader(x, images),
                   y=ff.create_data_loader(ff.label_tensor, labels))
    if epoch_begin is None:
        ff.fit(**loaders, epochs=EPOCHS)
    else:
        for epoch in range(EPOCHS):
            epoch_begin(ff, epoch)
            ff.fit(**loaders, epochs=1)
    lines = metric_lines(capsys)
    weights = all_weights(ff)
    return weights, lines, ff


def kill_during_run(monkeypatch, client, victim, at_call, signum=signal.SIGKILL):
    """Kill `victim` (its nanny first, then the worker; or stop both, with SIGSTOP) while the
    window of iterations that holds the `at_call`-th iteration runs."""
    pids = worker_processes(client, victim)
    calls = {"n": 0}
    original = DaskExecutor.run_window

    def run_window(self, phases, states, *args, **kwargs):
        if calls["n"] < at_call <= calls["n"] + len(states):
            strike(pids, signum, after=0.01)
        calls["n"] += len(states)
        return original(self, phases, states, *args, **kwargs)
    monkeypatch.setattr(DaskExecutor, "run_window", run_window)


THREE_GPUS = """# FlexFlow's machine-model file: three GPUs on one socket
num_nodes = 1
num_sockets_per_node = 1
num_cpus_per_socket = 3
num_gpus_per_socket = 3
nvlink_latency = 0.001
nvlink_bandwidth = 18.52
pci_latency = 0.001
pci_bandwidth = 12.578
intra_socket_gpu_fb_mem_to_gpu_fb_mem = nvlink
"""


@pytest.mark.parametrize("search", [False, True], ids=["data-parallel", "searched"])
def test_killed_worker_mid_fit(monkeypatch, capsys, tmp_path, search):
    """Data parallel: planned again data parallel. Searched on a machine-model file, which stops
    describing the devices once one is lost: the remaining workers are calibrated and the
    strategy searched again."""
    monkeypatch.setenv("FLEXFLOW_DASK_CACHE", str(tmp_path))
    machine = tmp_path / "machine.txt"
    machine.write_text(THREE_GPUS)
    search = ["--budget", "20", "--machine-model-file", str(machine)] if search else []
    reference, ref_lines, _ = build_and_fit(["-ll:gpu", "3", "--in-process"], capsys)
    at = random.Random(os.environ.get("PYTEST_SEED", "worker-loss")).randrange(
        2, EPOCHS * SAMPLES // BATCH)
    with loopback_cluster(workers=3) as address:
        try:
            cluster = cluster_module.connect(address, 3)
            client, victim = cluster.client, cluster.workers[1]
            kill_during_run(monkeypatch, client, victim, at)
            with pytest.warns(WorkerLostWarning, match="left the cluster"):
                weights, lines, ff = build_and_fit(
                    ["--scheduler", address, "-ll:gpu", "3", *search], capsys)
            assert len(ff.compiled.executor.workers) == 2 and victim not in ff.compiled.executor.workers
            assert all(config.devices and max(config.devices) < 2
                       for config in ff.strategy.values())
        finally:
            cluster_module.disconnect(address)
    assert len(lines) == len(ref_lines) == EPOCHS * SAMPLES // BATCH
    for line, ref_line in zip(lines, ref_lines):
        np.testing.assert_allclose(numbers(line), numbers(ref_line), rtol=1e-4, atol=1e-6)
    for w, w_ref in zip(weights, reference):
        assert np.linalg.norm(w - w_ref) <= 1e-4 * np.linalg.norm(w_ref) + 1e-6


def test_last_worker_lost_saves_a_checkpoint(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    with loopback_cluster(workers=1) as address:
        try:
            cluster = cluster_module.connect(address, 1)
            client, victim = cluster.client, cluster.workers[0]
            kill_during_run(monkeypatch, client, victim, 5)
            with pytest.warns(WorkerLostWarning), pytest.raises(ClusterLost,
                                                                 match="no Dask worker remains"):
                build_and_fit(["--scheduler", address, "-ll:gpu", "1"], capsys)
        finally:
            cluster_module.disconnect(address)
    saved = list(tmp_path.glob("flexflow-recovery-*.npz"))
    assert len(saved) == 1
    monkeypatch.undo()
    _, _, ff = build_and_fit(["--in-process"], capsys)
    ff.load_checkpoint(str(saved[0]))
    assert ff.compiled.updates == 3  # the copy taken every 3 updates, before the 5th iteration


def test_a_result_lost_with_its_worker_is_reported_not_waited_for():
    """The worker of a finished task leaves before its result is gathered: Dask would wait to
    compute it again, on a worker the run no longer has."""
    with loopback_cluster(workers=1) as address:
        try:
            cluster = cluster_module.connect(address, 1)
            client, victim = cluster.client, cluster.workers[0]
            pids = worker_processes(client, victim)
            future = client.submit(np.arange, 3, workers=[victim], pure=False)
            cluster_module.watched_wait(client, [future], [victim], "the test")
            strike(pids, signal.SIGKILL)
            outcome = []

            def gather():
                try:
                    cluster_module.watched_gather(client, [future], [victim], "the test")
                except cluster_module.WorkerLost as lost:
                    outcome.append(lost)
            waiting = threading.Thread(target=gather, daemon=True)
            waiting.start()
            waiting.join(30)
            assert not waiting.is_alive(), "the gather still waits for the lost worker"
            assert outcome and "during the test" in str(outcome[0])
        finally:
            cluster_module.disconnect(address)
