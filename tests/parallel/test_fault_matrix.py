"""The worker-loss matrix: a real cluster of 3 worker processes trains test_worker_loss's
2-epoch fit (a copy of the training state every 3 updates: windows of iterations 0-2, 3-5, 6-7,
then 8 alone, then 9-11, ...) while a worker is killed (SIGKILL) or stopped (SIGSTOP: a hung
machine, declared lost once it has not been heard from for STALL_S) at each point
where a run talks to its devices. Each run ends with the uninterrupted run's metric lines and
weights, or, when no worker remains, with the recovery file and ClusterLost."""

from __future__ import annotations

import os
import signal
import time
import warnings
from contextlib import contextmanager

import numpy as np
import pytest

from flexflow import deployment, recovery
from flexflow.compiled import CompiledRun
from flexflow.core import FFModel
from flexflow.recovery import ClusterLost, WorkerLostWarning
from flexflow.scheduler import cluster as cluster_module
from flexflow.scheduler import heartbeats
from flexflow.scheduler.distributed import DaskExecutor

from .cluster import loopback_cluster
from .faults import stopped_processes_killed, strike_in, worker_processes
from .test_worker_loss import THREE_GPUS, build_and_fit
from .training import all_weights, numbers

STALL_S = 5.0  # here a stopped worker is stalled after this long (ten missed heartbeats)
DECLARED_WITHIN_S = 10.0  # a stalled worker is declared lost this soon after it stops
FIRST_LOSS = 9  # during the window of iteration 8 alone: recovery restores the copy of update
                # 6 and plays again the window of iterations 6-7


@pytest.fixture(autouse=True)
def quick_stalls(monkeypatch):
    """Stopped workers found after STALL_S of silence rather than heartbeats.STALL_S's 10 s,
    which the SIGSTOP cases would otherwise wait out each time."""
    monkeypatch.setattr(heartbeats, "STALL_S", STALL_S)


@pytest.fixture(scope="module")
def reference():
    """The uninterrupted run's weights and metric lines, in this process."""
    return {}


def uninterrupted(reference, capsys, epoch_begin=None):
    key = epoch_begin.__name__ if epoch_begin else "plain"
    if key not in reference:
        weights, lines, _ = build_and_fit(["-ll:gpu", "3", "--in-process"], capsys, epoch_begin)
        reference[key] = weights, lines
    return reference[key]


def assert_same_run(weights, lines, expected) -> None:
    ref_weights, ref_lines = expected
    assert len(lines) == len(ref_lines)
    for line, ref_line in zip(lines, ref_lines):
        np.testing.assert_allclose(numbers(line), numbers(ref_line), rtol=1e-4, atol=1e-6)
    for w, w_ref in zip(weights, ref_weights):
        assert np.linalg.norm(w - w_ref) <= 1e-4 * np.linalg.norm(w_ref) + 1e-6


def assert_same_weights(actual: dict, expected: dict) -> None:
    assert sorted(actual) == sorted(expected)
    for key, w_ref in expected.items():
        assert np.linalg.norm(actual[key] - w_ref) <= 1e-4 * np.linalg.norm(w_ref) + 1e-6, key


class Victims:
    """The workers of a loopback cluster, the first last, struck in turn with `signum`;
    stopped processes are added to `stopped` (to be killed at the end)."""

    def __init__(self, monkeypatch, cluster, signum, stopped: list):
        self.monkeypatch, self.signum, self.stopped = monkeypatch, signum, stopped
        self.client = cluster.client
        self._left = [(worker, worker_processes(cluster.client, worker))
                      for worker in cluster.workers[1:] + cluster.workers[:1]]
        self.workers: list[str] = []  # those struck
        self.struck: list[float] = []  # when each strike was made (time.monotonic)

    def strike_at(self, owner, name: str, call: int = 1, after: float = 0.0) -> None:
        """The next victim is struck as the `call`-th call of `owner.name` starts (`after`
        seconds into it)."""
        worker, pids = self._left.pop(0)
        self.workers.append(worker)
        if self.signum == signal.SIGSTOP:
            self.stopped.extend(pids)
        strike_in(self.monkeypatch, owner, name, pids, self.signum, call, after, self.struck)

    def during_window(self, window: int) -> None:
        """The next victim is struck while the `window`-th window of iterations runs."""
        self.strike_at(DaskExecutor, "run_window", window, after=0.01)


def declared_lost(monkeypatch) -> list[float]:
    """When each loss is recovered from (time.monotonic), in order."""
    times: list[float] = []
    original = recovery.warn_lost

    def warn_lost(lost, during):
        times.append(time.monotonic())
        original(lost, during)
    monkeypatch.setattr(recovery, "warn_lost", warn_lost)
    return times


@contextmanager
def struck_cluster(monkeypatch, workers: int, signum=signal.SIGKILL):
    """A loopback cluster of `workers` and its Victims, connected to."""
    with loopback_cluster(workers=workers) as address, stopped_processes_killed() as stopped:
        try:
            yield address, Victims(monkeypatch, cluster_module.connect(address, workers),
                                   signum, stopped)
        finally:
            cluster_module.disconnect(address)


def fit_on(address: str, workers: int, capsys, argv=(), epoch_begin=None):
    """build_and_fit on the cluster at `address` (`workers` devices)."""
    return build_and_fit(["--scheduler", address, "-ll:gpu", str(workers), *argv], capsys,
                         epoch_begin)


def lower_the_learning_rate(ff, epoch: int) -> None:
    """A learning-rate schedule (as Keras' LearningRateScheduler sets one)."""
    if epoch == 1:
        ff.optimizer.set_learning_rate(0.01)


POINTS = {
    "compile": lambda victims: victims.strike_at(DaskExecutor, "set_weights"),
    "first-iteration": lambda victims: victims.during_window(1),
    "mid-epoch": lambda victims: victims.during_window(2),
    "two-in-a-row": lambda victims: (victims.during_window(2), victims.during_window(5)),
    # the recovery from a loss in window 4 restores the copy of update 6, then plays window 3
    # again as window 5
    "recovery-restore": lambda victims: (victims.during_window(4),
                                         victims.strike_at(CompiledRun, "restore")),
    "recovery-replay": lambda victims: (victims.during_window(4), victims.during_window(5)),
}
STALLS = ["compile", "mid-epoch", "recovery-restore"]


@pytest.mark.parametrize("signum, point",
                         [(signal.SIGKILL, point) for point in POINTS]
                         + [(signal.SIGSTOP, point) for point in STALLS],
                         ids=lambda value: getattr(value, "name", value))
def test_loss_at(monkeypatch, capsys, reference, signum, point):
    expected = uninterrupted(reference, capsys)
    declared = declared_lost(monkeypatch)
    with struck_cluster(monkeypatch, 3, signum) as (address, victims):
        POINTS[point](victims)
        with pytest.warns(WorkerLostWarning, match="left the cluster"):
            weights, lines, ff = fit_on(address, 3, capsys)
        assert not set(victims.workers) & set(ff.compiled.executor.workers)
    assert_same_run(weights, lines, expected)
    if signum == signal.SIGSTOP:
        delays = [end - start for start, end in zip(victims.struck, declared)]
        assert delays and max(delays) < DECLARED_WITHIN_S, delays


def test_loss_during_a_search(monkeypatch, capsys, reference, tmp_path):
    """Killed while the strategy is searched (on a machine-model file): planned again on the
    workers that remain, calibrated."""
    monkeypatch.setenv("FLEXFLOW_DASK_CACHE", str(tmp_path))
    machine = tmp_path / "machine.txt"
    machine.write_text(THREE_GPUS)
    expected = uninterrupted(reference, capsys)
    with struck_cluster(monkeypatch, 3) as (address, victims):
        victims.strike_at(deployment, "_search")
        with pytest.warns(WorkerLostWarning, match="left the cluster"):
            weights, lines, ff = fit_on(address, 3, capsys, ["--budget", "5",
                                                             "--machine-model-file",
                                                             str(machine)])
    assert_same_run(weights, lines, expected)


@pytest.mark.parametrize("plane", ["collectives", "messages"])
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGSTOP], ids=["SIGKILL", "SIGSTOP"])
def test_loss_during_save_checkpoint(monkeypatch, capsys, reference, tmp_path, signum, plane):
    """Sharded (messages), the save reads every device's optimizer state and recovers from the
    loss; all-reduced (collectives), every holder has the whole state and the save reads the
    first device's, which the loss of another leaves as it was (it is met later)."""
    expected_weights, _ = uninterrupted(reference, capsys)
    argv = ["--collectives", "off"] if plane == "messages" else []
    with struck_cluster(monkeypatch, 3, signum) as (address, victims):
        _, _, ff = fit_on(address, 3, capsys, argv)
        victims.strike_at(DaskExecutor, "get_weights")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", WorkerLostWarning)
            path = ff.save_checkpoint(str(tmp_path / "saved.npz"))
        lost = [w for w in caught if issubclass(w.category, WorkerLostWarning)]
        assert bool(lost) == (plane == "messages") and all(
            "left the cluster" in str(w.message) for w in lost)
        weights = all_weights(ff)
    saved = np.load(path)
    names = [f"weights/{layer.name}/{k}" for layer in ff.graph.layers
             for k in range(len(layer.weights))]
    assert_same_run([saved[name] for name in names], [], (expected_weights, []))
    assert_same_run(weights, [], (expected_weights, []))


def test_a_learning_rate_change_is_replayed_as_made(monkeypatch, capsys, reference):
    """The loss at the first iteration of epoch 2 goes back to the copy of update 6 (epoch 1,
    before the learning rate changed)."""
    expected = uninterrupted(reference, capsys, lower_the_learning_rate)
    with struck_cluster(monkeypatch, 3) as (address, victims):
        victims.during_window(4)
        with pytest.warns(WorkerLostWarning, match="left the cluster"):
            weights, lines, _ = fit_on(address, 3, capsys, epoch_begin=lower_the_learning_rate)
    assert_same_run(weights, lines, expected)


def recovered(capsys, tmp_path) -> FFModel:
    """The model with the one recovery file in `tmp_path` loaded, in this process."""
    saved = list(tmp_path.glob("flexflow-recovery-*.npz"))
    assert len(saved) == 1, saved
    _, _, ff = build_and_fit(["--in-process"], capsys)
    ff.load_checkpoint(str(saved[0]))
    return ff


def test_the_recovery_file_has_the_copys_learning_rate(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    with struck_cluster(monkeypatch, 1) as (address, victims):
        victims.during_window(4)
        with pytest.warns(WorkerLostWarning), pytest.raises(ClusterLost, match="was saved"):
            fit_on(address, 1, capsys, epoch_begin=lower_the_learning_rate)
    ff = recovered(capsys, tmp_path)
    assert ff.compiled.updates == 6 and ff.optimizer.lr == 0.05


def test_the_last_workers_lost_during_a_recovery(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    with struck_cluster(monkeypatch, 2) as (address, victims):
        victims.during_window(4)
        victims.strike_at(CompiledRun, "restore")
        with pytest.warns(WorkerLostWarning), pytest.raises(ClusterLost, match="was saved"):
            fit_on(address, 2, capsys)
    assert recovered(capsys, tmp_path).compiled.updates == 6


def test_the_scheduler_lost(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    with struck_cluster(monkeypatch, 2) as (address, victims):
        scheduler = victims.client.run_on_scheduler(os.getpid)
        strike_in(monkeypatch, DaskExecutor, "run_window", (scheduler,), signal.SIGKILL, 4,
                  after=0.01)
        with warnings.catch_warnings():  # (nothing is planned again: no WorkerLostWarning)
            warnings.simplefilter("error", WorkerLostWarning)
            with pytest.raises(ClusterLost, match=f"the Dask scheduler {address} was lost "
                                                  f"during .*was saved"):
                fit_on(address, 2, capsys)
    assert recovered(capsys, tmp_path).compiled.updates == 6
