"""Faults at chosen moments, for the worker-loss tests: a worker killed (SIGKILL, worker and
nanny, so it does not come back) or stopped (SIGSTOP: hung, as a machine that stops answering)
while a chosen method runs."""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager


@contextmanager
def stopped_processes_killed():
    """Yields a list to put stopped process ids in; kills them at the end (a stopped process
    would outlive its cluster's shutdown)."""
    stopped: list[int] = []
    try:
        yield stopped
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def worker_processes(client, worker: str) -> tuple[int, int]:
    """The process ids of `worker`: its nanny's first, then its own."""
    pid, nanny = client.run(lambda: (os.getpid(), os.getppid()), workers=[worker])[worker]
    return nanny, pid


def strike(pids: tuple[int, ...], signum: int, after: float = 0.0) -> None:
    """Send `signum` to each of `pids`, in order, `after` seconds from now (in the background)
    or at once."""
    def send():
        time.sleep(after)
        for pid in pids:
            os.kill(pid, signum)
    if after:
        threading.Thread(target=send).start()
    else:
        send()


def strike_in(monkeypatch, owner, name: str, pids: tuple[int, ...], signum: int,
              call: int = 1, after: float = 0.0, struck: list | None = None) -> None:
    """Send `signum` to `pids` as the `call`-th call of `owner.name` starts (`after` seconds
    into it); `struck`, if given, gets the time.monotonic() of the strike."""
    original = getattr(owner, name)
    calls = {"n": 0}

    def method(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == call:
            if struck is not None:
                struck.append(time.monotonic() + after)
            strike(pids, signum, after)
        return original(*args, **kwargs)
    monkeypatch.setattr(owner, name, method)
