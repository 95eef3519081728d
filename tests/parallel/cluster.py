"""A real multi-process Dask cluster on loopback, started with the `dask scheduler` and
`dask worker` commands, as a user would on separate machines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

def _command(*args: str) -> list[str]:
    """`dask <args>` with this interpreter's dask, whatever is on PATH."""
    return [sys.executable, "-m", "dask", *args]


@contextmanager
def loopback_cluster(workers: int, timeout: float = 60.0):
    """Yields the scheduler address of a cluster of `workers` single-threaded workers."""
    folder = Path(tempfile.mkdtemp(prefix="ffdask-cluster-"))
    scheduler_file = folder / "scheduler.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    log = open(folder / "cluster.log", "w")
    processes = [subprocess.Popen(
        _command("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                 "--scheduler-file", str(scheduler_file)), stdout=log, stderr=log, env=env)]
    try:
        deadline = time.monotonic() + timeout
        while not scheduler_file.exists():
            if time.monotonic() > deadline or processes[0].poll() is not None:
                raise RuntimeError(f"dask scheduler did not start; see {folder / 'cluster.log'}")
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        for i in range(workers):
            processes.append(subprocess.Popen(
                _command("worker", address, "--nthreads", "1", "--nworkers", "1", "--name",
                         f"device{i}", "--no-dashboard", "--host", "127.0.0.1"),
                stdout=log, stderr=log, env=env))
        yield address
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        log.close()
