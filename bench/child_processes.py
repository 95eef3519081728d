"""A bench's child process that leaves nothing behind: it runs in a process group of its own,
and whatever is left in that group (the child, the workers of a cluster it started, the ranks
it spawned) is ended when it finishes, fails, runs past its time or the bench is interrupted.
A terminal's Ctrl-C reaches only the bench (the group is not the terminal's), which then ends
the group; SIGTERM to the bench does the same once `end_groups_on_sigterm` is called."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

GRACE_S = 5.0  # from SIGTERM to SIGKILL


def end_groups_on_sigterm() -> None:
    """SIGTERM to this process unwinds it as Ctrl-C does, so the groups of its children end."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def run_child(command: list[str], env: dict[str, str], timeout_s: float = 3600) -> str:
    """The stdout and stderr of `command`; a RuntimeError if it fails or outlasts `timeout_s`.
    The output goes to a file, not a pipe, so a process the child leaves behind holding it
    open cannot keep this waiting once the child has exited."""
    with tempfile.TemporaryFile("w+") as output:
        child = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT,
                                 text=True, start_new_session=True)
        try:
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{' '.join(command)} ran past {timeout_s:.0f} s") from None
        finally:
            end_group(child)
        output.seek(0)
        text = output.read()
    if child.returncode:
        raise RuntimeError(f"{' '.join(command)} failed (exit status {child.returncode}):\n"
                           f"{text}")
    return text


def end_group(child: subprocess.Popen) -> None:
    """SIGTERM to what is left of the child's group, SIGKILL to what outlives the grace."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        if not _signal_group(child.pid, signum):
            break
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline:
            child.poll()  # reaps the child once it has exited, so it stops counting
            if not _signal_group(child.pid, 0):
                break
            time.sleep(0.05)
    child.wait()


def _signal_group(group: int, signum: int) -> bool:
    """Sends `signum` to process group `group`; False when no process is left in it."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    return True
