"""The CPU cluster `-ll:gpu N` starts: a scheduler and N nannies (each with its worker) as
`dask spec` commands on loopback, over TLS with a throwaway certificate unless asked otherwise.

Being commands of their own (as in Dask's SubprocessCluster), they never import the user's
`__main__`. They run in a session of their own, so that a signal to the run's process group (Ctrl-C
in a terminal, `timeout`) reaches the run alone, which then closes them; and each watches the run's
process (scheduler/lifetime.py), so that they end with it however it ends. What such a command is
to build travels as JSON on its command line, which every user of the machine can read
(`/proc/PID/cmdline`): so the certificate and its private key are written to a folder only this
user can read (0700, files 0600, removed when the cluster closes), and the commands build our
`Scheduler` and `Nanny`, which take that folder's path and load the files into Dask's `Security`
when they start. The same classes take the Dask config the cluster runs with
(scheduler/history.py), which a child process would otherwise read from its own environment only.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import dask
import distributed
from distributed.deploy.spec import SpecCluster
from distributed.deploy.subprocess import SubprocessScheduler, SubprocessWorker
from distributed.security import Security

from . import lifetime

# the PEM text of Security.temporary()'s one certificate, which every role of the cluster shares
_FILES = {"ca.pem": "tls_ca_file", "cert.pem": "tls_scheduler_cert", "key.pem": "tls_scheduler_key"}
_ROLES = ("scheduler", "worker", "client")
START_TIMEOUT_S = 30


def write_tls_files(folder: Path, security: Security) -> None:
    """`security`'s (a `Security.temporary()`) CA, certificate and key, as files only this user
    can read, in `folder`."""
    for name, field in _FILES.items():
        descriptor = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(getattr(security, field))


def folder_security(folder: str | None) -> Security | None:
    """The Security of a process of the cluster whose files are in `folder` (write_tls_files),
    held in memory from here on; None (Dask's default) without a folder."""
    if folder is None:
        return None
    ca, cert, key = ((Path(folder) / name).read_text() for name in _FILES)
    roles = {}
    for role in _ROLES:
        roles.update({f"tls_{role}_cert": cert, f"tls_{role}_key": key})
    return Security(require_encryption=True, tls_ca_file=ca, **roles)


class Scheduler(distributed.Scheduler):
    """Dask's scheduler, secured by the files in `tls_folder` (if any), with `config` set in its
    process; it ends when its `owner` does, removing the cluster's `folder`."""

    def __init__(self, *args, owner: list, folder: str, tls_folder: str | None = None,
                 config: dict | None = None, **kwargs):
        dask.config.set(config or {})
        lifetime.watch(lifetime.Owner.from_option(owner),
                       lambda: shutil.rmtree(folder, ignore_errors=True))
        super().__init__(*args, security=folder_security(tls_folder), **kwargs)


class Nanny(distributed.Nanny):
    """Dask's nanny (and the worker it starts), secured by the files in `tls_folder` (if any);
    it ends, with its worker, when its `owner` does."""

    def __init__(self, *args, owner: list, tls_folder: str | None = None, **kwargs):
        lifetime.watch(lifetime.Owner.from_option(owner))
        super().__init__(*args, security=folder_security(tls_folder), **kwargs)


async def _spec_command(*arguments: str, spec: dict, **options):
    """A `dask spec` command building `spec`, in a session of its own."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dask", "spec", *arguments, "--spec", json.dumps(spec),
        start_new_session=True, **options)


class _SchedulerProcess(SubprocessScheduler):
    """A `dask spec` command running our Scheduler (Dask's SubprocessScheduler runs its own
    class, which cannot be given a Security)."""

    async def _start(self) -> None:
        self.process = await _spec_command(
            spec={"cls": f"{__name__}.Scheduler", "opts": self.scheduler_kwargs},
            stderr=asyncio.subprocess.PIPE)
        self.address = await _address_written(Path(self.scheduler_kwargs["scheduler_file"]),
                                              self.process, self.timeout)


class _NannyProcess(SubprocessWorker):
    """A `dask spec` command running our Nanny, in a session of its own."""

    async def _start(self) -> None:
        self.process = await _spec_command(
            self.scheduler, spec={"cls": self.worker_class, "opts": self.worker_kwargs})


async def _address_written(scheduler_file: Path, process, timeout: float) -> str:
    """The address a starting scheduler writes to its file, once the file is complete."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while process.returncode is None and loop.time() < deadline:
        try:
            return json.loads(scheduler_file.read_text())["address"]
        except (OSError, json.JSONDecodeError):  # not written yet, or half written
            await asyncio.sleep(0.1)
    errors = (await process.stderr.read()).decode() if process.returncode is not None else ""
    raise RuntimeError(f"the local Dask scheduler did not start within {timeout} s"
                       if not errors else f"the local Dask scheduler did not start:\n{errors}")


class LocalProcessCluster(SpecCluster):
    """A scheduler and `n_workers` nannies as `dask spec` commands on loopback, over TLS with a
    certificate of their own when `tls`, all running with the Dask `config` given, and ending
    when this process does."""

    def __init__(self, n_workers: int, tls: bool, config: dict, scheduler_options: dict,
                 worker_options: dict, **kwargs):
        owner = lifetime.Owner.this_process()
        self.folder = lifetime.make_folder(owner)
        try:
            security = Security.temporary() if tls else None
            if security is not None:
                write_tls_files(self.folder, security)
            shared = {"host": "127.0.0.1", "protocol": "tls" if tls else "tcp",
                      "tls_folder": str(self.folder) if tls else None,
                      "owner": owner.as_option()}
            scheduler = {"cls": _SchedulerProcess, "options": {
                "timeout": START_TIMEOUT_S, "scheduler_kwargs": {
                    **shared, "port": 0, "scheduler_file": str(self.folder / "scheduler.json"),
                    "folder": str(self.folder), "config": config, **scheduler_options}}}
            worker = {"cls": _NannyProcess, "options": {
                "worker_class": f"{__name__}.Nanny",
                "worker_kwargs": {**shared, "config": config, **worker_options}}}
            super().__init__(workers=dict.fromkeys(range(n_workers), worker), scheduler=scheduler,
                             worker=worker, security=security, name="LocalProcessCluster",
                             **kwargs)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    async def _close(self) -> None:
        try:
            await super()._close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def kill(self) -> None:
        """End every process of the cluster at once and remove its folder: for a cluster that
        did not close in time (its scheduler gone, say)."""
        processes = [self.scheduler, *self.workers.values()]
        for process in [getattr(p, "process", None) for p in processes]:
            if process is not None and process.returncode is None:
                lifetime.kill_tree(process.pid)
        shutil.rmtree(self.folder, ignore_errors=True)
