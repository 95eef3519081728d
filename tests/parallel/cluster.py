"""A real multi-process Dask cluster on loopback, started with the `dask scheduler` and
`dask worker` commands, as a user would on separate machines (over TLS when given its files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from flexflow.scheduler.security import TLSFiles


def _command(*args: str) -> list[str]:
    """`dask <args>` with this interpreter's dask, whatever is on PATH."""
    return [sys.executable, "-m", "dask", *args]


@contextmanager
def loopback_cluster(workers: int, timeout: float = 60.0, tls: TLSFiles | None = None):
    """Yields the scheduler address of a cluster of `workers` single-threaded workers; with
    `tls`, the scheduler and workers use those files and the address is tls://."""
    tls_options = _tls_options(tls) if tls else []
    folder = Path(tempfile.mkdtemp(prefix="ffdask-cluster-"))
    scheduler_file = folder / "scheduler.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    log = open(folder / "cluster.log", "w")
    processes = [subprocess.Popen(
        _command("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                 "--scheduler-file", str(scheduler_file), *tls_options),
        stdout=log, stderr=log, env=env)]
    try:
        address = _scheduler_address(scheduler_file, processes[0], time.monotonic() + timeout)
        for i in range(workers):
            processes.append(subprocess.Popen(
                _command("worker", address, "--nthreads", "1", "--nworkers", "1", "--name",
                         f"device{i}", "--no-dashboard", "--host", "127.0.0.1", *tls_options),
                stdout=log, stderr=log, env=env))
        yield address
    finally:
        _stop(processes[1:])  # the workers first: they leave a scheduler that is still there
        _stop(processes[:1])
        log.close()


def _stop(processes: list[subprocess.Popen]) -> None:
    """Terminate `processes` together and wait for them, killing any still there after 10 s."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def _scheduler_address(scheduler_file: Path, scheduler: subprocess.Popen, deadline: float) -> str:
    """The address the scheduler writes to its file, once the file is complete."""
    while True:
        try:
            return json.loads(scheduler_file.read_text())["address"]
        except (FileNotFoundError, json.JSONDecodeError):  # not written yet, or half written
            if time.monotonic() > deadline or scheduler.poll() is not None:
                raise RuntimeError("dask scheduler did not start; see "
                                   f"{scheduler_file.parent / 'cluster.log'}") from None
            time.sleep(0.1)


def _tls_options(tls: TLSFiles) -> list[str]:
    """The `dask scheduler` / `dask worker` options of a TLS cluster using the files `tls`."""
    return ["--protocol", "tls", "--tls-ca-file", tls.ca_file, "--tls-cert", tls.cert,
            "--tls-key", tls.key]


@contextmanager
def two_worker_argv():
    """Yields the flags that run a model on a fresh 2-worker `loopback_cluster` (`--scheduler`
    and `-ll:gpu 2`), the client disconnected from it before the cluster stops."""
    from flexflow.scheduler import cluster as cluster_module
    with loopback_cluster(workers=2) as address:
        try:
            yield ["--scheduler", address, "-ll:gpu", "2"]
        finally:
            cluster_module.disconnect(address)
