"""A local cluster lives no longer than the run that started it, however that run ends.

The processes of a cluster the package starts (the `dask spec` scheduler and nannies of
scheduler/local_processes.py) are told who their owner is: the run's process, as its pid and the
time it started, so that a pid the system hands to another process later is not taken for it.
Each watches its owner from a thread and, once the owner is gone (ended by any signal, SIGKILL
included, where no exit-time clean-up runs), kills its own children, removes what it was told to
remove (the scheduler: the cluster's folder, which holds the TLS key) and exits. A worker process
ends with its nanny (Dask's worker processes exit when the pipe from their nanny closes).

The cluster's folder also names its owner (`owner.json`), so a run that starts a cluster removes
the folders of earlier clusters whose owner is dead, should one have outlived its processes.

In the run itself, Ctrl-C ends it with one line and closes its clusters first
(`close_on_interrupt`); the clusters' processes run in sessions of their own, so that the
terminal's signal reaches the run alone.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import psutil

POLL_S = 0.5  # how often a cluster process looks for its owner
FOLDER_PREFIX = "flexflow-cluster-"
OWNER_FILE = "owner.json"


@dataclass(frozen=True)
class Owner:
    """A process, told apart from a later one given the same pid by the time it started."""

    pid: int
    started: float

    @classmethod
    def this_process(cls) -> "Owner":
        return cls(os.getpid(), psutil.Process().create_time())

    @classmethod
    def from_option(cls, option) -> "Owner":
        """The owner a cluster process was given on its command line (`as_option`)."""
        pid, started = option
        return cls(int(pid), float(started))

    def as_option(self) -> list:
        """The owner as JSON, for a cluster process's command line."""
        return [self.pid, self.started]

    def alive(self) -> bool:
        try:
            process = psutil.Process(self.pid)
            return (process.create_time() == self.started
                    and process.status() != psutil.STATUS_ZOMBIE)
        except psutil.Error:  # gone, or no longer ours to see
            return False


def watch(owner: Owner, on_gone: Callable[[], None] = lambda: None,
          poll_s: float = POLL_S) -> threading.Thread:
    """A daemon thread that, once `owner` is gone, kills this process's children, calls
    `on_gone()` and ends this process."""
    def run():
        while owner.alive():
            time.sleep(poll_s)
        try:
            for child in psutil.Process().children(recursive=True):
                _kill(child)
            on_gone()
        finally:
            os._exit(0)
    thread = threading.Thread(target=run, name="flexflow-owner-watch", daemon=True)
    thread.start()
    return thread


def kill_tree(pid: int) -> None:
    """Kill the process `pid` and all its descendants."""
    try:
        process = psutil.Process(pid)
        for child in process.children(recursive=True):
            _kill(child)
        _kill(process)
    except psutil.Error:  # already gone
        pass


def _kill(process: psutil.Process) -> None:
    try:
        process.kill()
    except psutil.Error:  # ended meanwhile
        pass


def make_folder(owner: Owner) -> Path:
    """A new cluster folder (mode 0700) naming `owner`, after removing orphaned ones."""
    remove_orphaned_folders()
    folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
    (folder / OWNER_FILE).write_text(json.dumps(owner.as_option()))
    return folder


def remove_orphaned_folders(parent: Path | None = None) -> list[Path]:
    """Remove the cluster folders in `parent` (the temporary folder) whose owner is dead; the
    folders removed. A folder without a readable owner is left: it may be being made."""
    removed = []
    for folder in Path(parent or tempfile.gettempdir()).glob(FOLDER_PREFIX + "*"):
        try:
            owner = Owner.from_option(json.loads((folder / OWNER_FILE).read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if not owner.alive():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def close_on_interrupt(close: Callable[[], None], stream=None) -> None:
    """Make an uncaught KeyboardInterrupt (Ctrl-C) end the run with one line on `stream`
    (stderr) instead of a traceback through Dask's waits, after `close()` has closed the
    clusters; other exceptions reach the hook that was there before. Installed once."""
    previous = sys.excepthook
    if getattr(previous, "closes_clusters", False):
        return

    def hook(kind, value, traceback):
        if not issubclass(kind, KeyboardInterrupt):
            return previous(kind, value, traceback)
        where = "; ".join(getattr(value, "__notes__", ())) or "the run"
        print(f"Interrupted (Ctrl-C) during {where}; closing the local Dask cluster.",
              file=stream or sys.stderr, flush=True)
        # a wait the interrupt cut short can leave a callback on the client's event loop that
        # fails as the loop closes (distributed's `sync` cancelling a future it never made),
        # which tornado would log as a traceback after the one line
        logging.getLogger("tornado.application").setLevel(logging.CRITICAL)
        close()
    hook.closes_clusters = True
    sys.excepthook = hook


def dask_setup(worker) -> None:
    """Dask preload (`preload=[__name__]`) for the worker processes of a GPU cluster: they are
    this process's children, in its process group, so Ctrl-C in a terminal reaches them too; they
    leave it to the run, which closes them (and they end with it in any case)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
