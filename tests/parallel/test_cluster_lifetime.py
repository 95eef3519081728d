"""A `-ll:gpu 2` run ended from outside takes its local cluster with it: after SIGKILL, SIGTERM
or SIGINT, to the run's process or to its process group, the run has exited within 10 s, no
process of its cluster is left 30 s later, and neither is the cluster's folder (with its TLS
key); Ctrl-C says so in one line. On the CPU path (`dask spec` processes watching the run) and
on the GPU path (dask_cuda's cluster, faked by a LocalCluster of processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from flexflow.scheduler import lifetime

from ..launcher.run import SCRIPTS
from ..examples.runner import SINGLE_THREADED_BLAS

LONG_FIT = SCRIPTS / "long_fit.py"
EXIT_S, GONE_S = 10.0, 30.0


def start_run(folder: Path, *flags: str) -> subprocess.Popen:
    """long_fit.py on `-ll:gpu 2`, in a process group of its own, once its fit has begun; its
    output goes to files in `folder` (a pipe would stay open in processes that outlive it)."""
    out, err = folder / "stdout.txt", folder / "stderr.txt"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        run = subprocess.Popen([sys.executable, str(LONG_FIT), "-ll:gpu", "2", "-b", "8", *flags],
                               stdout=stdout, stderr=stderr, start_new_session=True,
                               env={**os.environ, **SINGLE_THREADED_BLAS})
    deadline = time.monotonic() + 120
    while "fit starts" not in out.read_text():
        if run.poll() is not None or time.monotonic() > deadline:
            run.kill()
            pytest.fail(f"the run did not reach its fit:\n{err.read_text()[-3000:]}")
        time.sleep(0.2)
    time.sleep(1.0)  # some iterations into the fit
    return run


def cluster_folders(pid: int) -> list[Path]:
    """The cluster folders in the temporary folder that name process `pid` as their owner."""
    folders = []
    for folder in Path(tempfile.gettempdir()).glob(lifetime.FOLDER_PREFIX + "*"):
        try:
            if json.loads((folder / lifetime.OWNER_FILE).read_text())[0] == pid:
                folders.append(folder)
        except (OSError, ValueError):
            continue
    return folders


def living(processes: list[psutil.Process]) -> list[int]:
    alive = []
    for process in processes:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process.pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def end_run(run: subprocess.Popen, signum: int, to_group: bool) -> float:
    """Send `signum` to the run (or its group); the seconds it took to exit."""
    sent = time.monotonic()
    if to_group:
        os.killpg(run.pid, signum)
    else:
        os.kill(run.pid, signum)
    try:
        run.wait(timeout=EXIT_S)
    except subprocess.TimeoutExpired:
        run.kill()
        pytest.fail(f"the run had not exited {EXIT_S:g} s after {signal.Signals(signum).name}")
    return time.monotonic() - sent


def assert_cluster_gone(cluster: list[psutil.Process], folders: list[Path]) -> None:
    deadline = time.monotonic() + GONE_S
    while living(cluster) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = living(cluster)
    for pid in left:  # (not to outlive the test)
        lifetime.kill_tree(pid)
    assert not left, f"{len(left)} of the cluster's {len(cluster)} processes outlived the run"
    assert not [folder for folder in folders if folder.exists()]


SIGNALS = [(signal.SIGKILL, False), (signal.SIGKILL, True), (signal.SIGTERM, False),
           (signal.SIGTERM, True), (signal.SIGINT, False), (signal.SIGINT, True)]


@pytest.mark.parametrize("signum, to_group", SIGNALS,
                         ids=[f"{s.name}-{'group' if g else 'process'}" for s, g in SIGNALS])
def test_the_cpu_cluster_ends_with_its_run(signum, to_group, tmp_path):
    run = start_run(tmp_path)
    cluster = psutil.Process(run.pid).children(recursive=True)
    folders = cluster_folders(run.pid)
    assert len(cluster) >= 5 and len(folders) == 1  # a scheduler, two nannies and their workers
    assert (folders[0] / "key.pem").exists()
    end_run(run, signum, to_group)
    assert_cluster_gone(cluster, folders)
    if signum == signal.SIGINT:
        assert_one_line_interrupt((tmp_path / "stderr.txt").read_text())


@pytest.mark.parametrize("signum, to_group", [(signal.SIGKILL, False), (signal.SIGINT, True)],
                         ids=["SIGKILL-process", "SIGINT-group"])
def test_the_gpu_cluster_ends_with_its_run(signum, to_group, tmp_path):
    run = start_run(tmp_path, "--fake-gpus")
    cluster = psutil.Process(run.pid).children(recursive=True)
    assert len(cluster) >= 2  # the two worker processes (the nannies run in the run's process)
    end_run(run, signum, to_group)
    assert_cluster_gone(cluster, [])
    if signum == signal.SIGINT:
        assert_one_line_interrupt((tmp_path / "stderr.txt").read_text())


def assert_one_line_interrupt(stderr: str) -> None:
    """Ctrl-C during fit: one line saying where, no traceback."""
    lines = [line for line in stderr.splitlines() if not line.startswith("[Metrics]")]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert len(lines) == 1, lines
    assert lines[0].startswith("Interrupted (Ctrl-C) during fit, epoch "), lines
    assert lines[0].endswith("closing the local Dask cluster."), lines


def test_a_folder_whose_owner_is_dead_is_removed_by_the_next_cluster(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    orphan, owned, unnamed = (tmp_path / f"{lifetime.FOLDER_PREFIX}{n}" for n in "abc")
    for folder in (orphan, owned, unnamed):
        folder.mkdir()
    (orphan / lifetime.OWNER_FILE).write_text(json.dumps([int(dead.stdout), time.time() - 5]))
    (owned / lifetime.OWNER_FILE).write_text(json.dumps(lifetime.Owner.this_process()
                                                        .as_option()))
    assert lifetime.remove_orphaned_folders(tmp_path) == [orphan]
    assert not orphan.exists() and owned.exists() and unnamed.exists()


def test_an_owner_is_not_a_later_process_with_its_pid():
    me = lifetime.Owner.this_process()
    assert me.alive()
    assert not lifetime.Owner(me.pid, me.started + 1).alive()


def test_after_ctrl_c_the_event_loops_leftover_errors_are_not_printed(monkeypatch, capsys,
                                                                      caplog):
    """The hook prints its one line, closes, and from then on an error tornado logs (a
    callback of the interrupted wait failing as the loop closes: distributed's `sync`) is
    not emitted; before it, it would be."""
    import logging
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    logger = logging.getLogger("tornado.application")
    monkeypatch.setattr(logger, "level", logger.level)
    closed = []
    lifetime.close_on_interrupt(lambda: closed.append(True))
    logger.error("before the interrupt")
    sys.excepthook(KeyboardInterrupt, KeyboardInterrupt(), None)
    logger.error("Exception in callback: NameError")
    assert closed and capsys.readouterr().err.startswith("Interrupted (Ctrl-C) during the run")
    assert [r.getMessage() for r in caplog.records if r.name == logger.name] == [
        "before the interrupt"]
