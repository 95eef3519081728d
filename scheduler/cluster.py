"""Starting or connecting to the Dask cluster a run uses (DESIGN.md, "The cluster").

| situation                                   | what runs                                          |
| `--scheduler ADDRESS` / DASK_SCHEDULER_ADDRESS | connect; every worker of that cluster is a device  |
| GPUs present, `-ll:gpu N`                   | dask_cuda.LocalCUDACluster, N workers (`-ll:fsize` = RMM pool per GPU, with RMM) |
| no GPU, `-ll:gpu N` with N > 1              | N single-threaded worker processes, as commands of their own (scheduler/local_processes.py), with a notice |
| one device, no address                      | None: the in-process executor                      |

Clusters this module starts are kept for the life of the process (models compiled one after the
other share them) and closed at exit.
A `tls://` address is reached over TLS (scheduler/security.py). Clusters started here listen on
loopback only and use TLS with a throwaway certificate, so that no other process of the machine can
join them or run code in them; `--plain-cluster` (`plain`) makes them plain TCP. They run with
bounded histories (scheduler/history.py) and without Dask's statistical profiler on the workers
(`CLUSTER_CONFIG`).
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import importlib.util
import logging
import sys
import time
import warnings
from concurrent.futures import CancelledError
from dataclasses import dataclass
from typing import Any

from . import heartbeats, lifetime
from .heartbeats import responsive
from .history import BOUNDED_HISTORY
from .security import TLSFiles, client_security, local_cluster_tls

_STARTED: dict[tuple, "Cluster"] = {}
WATCH_S = 1.0  # how often a client waiting on tasks checks that their workers are still there
SCHEDULER_WAIT_S = 15.0  # a scheduler that has not answered for this long is gone
# A task's future ends so when it failed, or when Dask lost what it needed (a worker that held a
# scattered input left)
FAILED = ("error", "cancelled")
# The scheduler of a cluster started here drops a worker it has not heard from for this long
# (Dask's default is 5 minutes); the client declares one lost sooner (scheduler/heartbeats.py)
SCHEDULER_OPTIONS = {"worker_ttl": "10s"}
# The Dask config of the clusters started here: bounded histories, and no statistical profiler
# on the workers unless a performance report will show it (sampling every thread's stack every
# 10 ms costs a training run about 5% of its throughput on a shared host)
CLUSTER_CONFIG = {**BOUNDED_HISTORY, "distributed.worker.profile.enabled": False}
CLOSE_S = 5.0  # the longest a client or a cluster we started is waited for to close
CONNECT_S = 10.0  # the longest a scheduler at a given address is waited for to answer


@dataclass
class Cluster:
    client: Any
    workers: list[str]  # device d runs on workers[d]
    owned: Any = None   # the LocalCluster we started, if any
    memory: list[int | None] | None = None  # each worker's memory limit, read with the list

    def refreshed(self, limit: int | None = None) -> "Cluster":
        """The same cluster with the workers alive now (the first `limit` of them), without
        waiting for more: after a worker is lost, the devices that remain."""
        return _listed(self.client, limit, self.owned)

    def close(self) -> None:
        """Close our client, then the cluster we started, each within CLOSE_S: a cluster that
        does not close in time (its scheduler gone, say) has its processes killed."""
        try:
            self.client.close(timeout=CLOSE_S)
        except Exception:  # the scheduler is gone or does not answer: nothing to wait for
            pass
        if self.owned is None:
            return
        try:
            self.owned.close(timeout=CLOSE_S)
        except Exception:
            kill = getattr(self.owned, "kill", None)  # (a GPU cluster's workers end with us)
            if kill is not None:
                kill()


class WorkerLost(RuntimeError):
    """Workers of the run left the cluster (killed, crashed, or cut off) while it needed them."""

    def __init__(self, workers: list[str], during: str):
        self.workers = sorted(workers)
        super().__init__(f"Dask worker(s) {', '.join(self.workers)} left the cluster during "
                         f"{during}")


class SchedulerLost(WorkerLost):
    """The run's Dask scheduler is gone (the client lost its connection, or it has not answered
    for SCHEDULER_WAIT_S), and with it every worker as far as the run can tell."""

    def __init__(self, address: str, during: str):
        self.workers, self.address = [], address
        RuntimeError.__init__(self, f"the Dask scheduler {address} was lost during {during} "
                                    f"(its connection closed, or it did not answer for "
                                    f"{SCHEDULER_WAIT_S:g} s)")


class TooFewGPUs(ValueError):
    """`-ll:gpu N` asks for more GPUs than the machine has (raised before anything starts)."""


class SchedulerNotFound(ConnectionError):
    """No Dask scheduler answers at the address a run was given."""


def workers_now(client, during: str = "a look at the cluster") -> dict[str, dict]:
    """The scheduler's workers but the stalled ones (scheduler/heartbeats.py), asked of the
    scheduler itself: `Client.scheduler_info` returns the client's cached identity, which a
    periodic refresh may replace meanwhile by one that lists no workers at all. SchedulerLost
    when the scheduler is gone."""
    deadline = time.monotonic() + SCHEDULER_WAIT_S
    while client.status == "running" and time.monotonic() < deadline:
        try:
            identity = client.sync(client.scheduler.identity, n_workers=-1,
                                   callback_timeout=WATCH_S)
        except (OSError, TimeoutError):  # asked again, unless the client has lost it
            continue
        return responsive(client, identity["workers"])
    raise SchedulerLost(client.scheduler.address, during)


def _listed(client, limit: int | None, owned=None) -> Cluster:
    """The cluster's workers now, sorted by address, and their memory limits, from one reading
    of the scheduler (a worker that leaves later is then reported, not looked up and missed)."""
    info = workers_now(client)
    workers = sorted(info)[:limit] if limit else sorted(info)
    return Cluster(client, workers, owned, [info[w].get("memory_limit") or None for w in workers])


def alive(client, workers: list[str], during: str = "a look at the cluster") -> set[str]:
    """Which of `workers` the scheduler still has (SchedulerLost when it is gone)."""
    return set(workers) & set(workers_now(client, during))


def check_alive(client, workers: list[str], during: str, futures: list = ()) -> None:
    """Raise WorkerLost (after cancelling `futures`) if any of `workers` has left, or
    SchedulerLost if the scheduler has."""
    lost = set(workers) - alive(client, workers, during)
    if lost:
        if futures:
            client.cancel(list(futures))
        raise WorkerLost(sorted(lost), during)


def await_loss(client, workers: list[str], during: str) -> None:
    """After a call failed to reach one of `workers`: WorkerLost once the scheduler no longer
    has one (it takes a moment to notice a dead worker, and STALL_S to find one cut off);
    returns if all are still there by then, for the caller to raise its error."""
    deadline = time.monotonic() + heartbeats.STALL_S + 2 * WATCH_S
    while True:
        check_alive(client, workers, during)
        if time.monotonic() > deadline:
            return
        time.sleep(WATCH_S / 4)


def run_on(client, workers: list[str], during: str, fn, *args) -> dict:
    """`fn(*args)` in the process of each of `workers` (Client.run): {worker: result}. Client.run
    waits out Dask's connect timeout (30 s) for a worker the scheduler has already dropped, so
    the scheduler is asked first, and WorkerLost raised at once; the call then waits in slices
    that check liveness (`watched_run`), and one that cannot reach a worker waits for the
    scheduler to see it gone (`await_loss`) before raising its error."""
    check_alive(client, workers, during)
    try:
        return watched_run(client, workers, during, fn, *args)
    except (OSError, KeyError):
        await_loss(client, workers, during)
        raise


def watched_wait(client, futures: list, workers: list[str], during: str) -> None:
    """Wait until all of `futures`, run on `workers`, are done or one has failed; a task pinned
    to a worker that has left would wait for ever, so wait in short slices and raise WorkerLost
    when one of `workers` has gone."""
    from distributed import wait

    pending = list(futures)
    with client.as_current():
        while pending:
            try:
                done, pending = wait(pending, timeout=WATCH_S, return_when="FIRST_COMPLETED")
                if any(future.status in FAILED for future in done):
                    return
            except TimeoutError:
                check_alive(client, workers, during, futures)
            except (CancelledError, OSError):  # Dask lost what a task needed (a worker that
                check_alive(client, workers, during, futures)  # held it left), or the
                raise                                          # connection to the scheduler


def watched_gather(client, futures: list, workers: list[str], during: str) -> list:
    """The results of `futures` (finished, on `workers`). A result that a worker took with it
    when it left would be waited for for ever (Dask computes it again, on a worker it may no
    longer have), so gather in short slices and raise WorkerLost when one of `workers` has
    gone."""
    while True:
        try:
            return client.sync(client._gather, futures, callback_timeout=WATCH_S)
        except TimeoutError:
            check_alive(client, workers, during, futures)
        except (CancelledError, OSError):  # as in watched_wait
            check_alive(client, workers, during, futures)
            raise


def watched_run(client, workers: list[str], during: str, fn, *args) -> dict:
    """`Client.run(fn, *args, workers=workers)`: {worker: result}. A worker that stalls would
    keep it waiting, so wait in short slices and raise WorkerLost when one of `workers` has
    gone."""
    return _watched(client, client._run(fn, *args, workers=workers), workers, during)


def watched_scatter(client, data, workers: list[str], during: str) -> dict[str, Any]:
    """`data` scattered to each of `workers` on its own: {worker: its future}. Not
    `Client.scatter(broadcast=True)`: Dask's replication holds a scheduler-wide lock while it
    retries, for ever, a worker that died during it, and every later replication waits behind
    it. The wait is watched as `watched_run`'s is."""
    async def to_each():
        futures = await asyncio.gather(*(client._scatter(data, workers=[worker], hash=False)
                                         for worker in workers))
        return dict(zip(workers, futures))
    return _watched(client, to_each(), workers, during)


def _watched(client, coroutine, workers: list[str], during: str):
    """The result of the client's `coroutine`, waited for in slices of WATCH_S that raise
    WorkerLost (cancelling it) when one of `workers` has gone."""
    pending = asyncio.run_coroutine_threadsafe(coroutine, client.loop.asyncio_loop)
    while True:
        try:
            return pending.result(WATCH_S)
        except TimeoutError:
            try:
                check_alive(client, workers, during)
            except WorkerLost:
                pending.cancel()
                raise


def dashboard(client) -> str:
    """Where the cluster's Dask dashboard is, or what it needs."""
    if importlib.util.find_spec("bokeh") is None:
        return 'dashboard: none (it needs bokeh: pip install "flexflow-dask[viz]")'
    return f"dashboard: {client.dashboard_link}"


def disconnect(address: str) -> None:
    """Close our client of the cluster at `address` (before that cluster goes away)."""
    cluster = _STARTED.pop(("address", address), None)
    if cluster is not None:
        cluster.close()


def array_module(cpu_only: bool = False):
    """cupy where a GPU is usable (and not refused), numpy elsewhere."""
    cupy = None if cpu_only else _usable_cupy()
    if cupy is not None:
        return cupy
    import numpy

    return numpy


def gpu_count() -> int:
    cupy = _usable_cupy()
    return 0 if cupy is None else cupy.cuda.runtime.getDeviceCount()


def _usable_cupy():
    """CuPy where it can use a GPU here; None without CuPy or without a GPU, and, with a
    warning that names the error, where CuPy is installed but fails (a driver too old, a CUDA
    library missing), so that a broken GPU setup is not taken for a machine without GPUs."""
    try:
        import cupy

        return cupy if cupy.cuda.is_available() and cupy.cuda.runtime.getDeviceCount() else None
    except ModuleNotFoundError:
        return None
    except Exception as error:
        _warn_once(f"CuPy is installed but cannot use a GPU here ({type(error).__name__}: "
                   f"{error}); running on NumPy")
        return None


@functools.lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def connect(address: str, num_devices: int | None = None, stream=sys.stdout,
            tls: TLSFiles = TLSFiles()) -> Cluster:
    """Use an existing cluster. Its workers, sorted by address, are the devices: all of them,
    or the first `num_devices` when that is given (`-ll:gpu N`). A `tls://` address is reached
    with the TLS files `tls` names or Dask's config does (scheduler/security.py)."""
    key = ("address", address)
    if key not in _STARTED:
        import dask
        from distributed import Client

        security = client_security(address, tls)  # checked before any connection is tried
        check_scheduler(address, security)
        with dask.config.set(BOUNDED_HISTORY):  # (our client's own logs)
            client = Client(address, security=security, set_as_default=False)
        _STARTED[key] = Cluster(client, [])
        print(f"Connected to Dask scheduler {address}; {dashboard(client)}", file=stream)
    client = _STARTED[key].client
    client.wait_for_workers(num_devices or 1, timeout=60)
    return _listed(client, num_devices)


def check_scheduler(address: str, security=None) -> None:
    """Refuse, within CONNECT_S, an address where no Dask scheduler answers: `Client()` waits for
    ever on a server that takes the connection and speaks another protocol."""
    from concurrent.futures import ThreadPoolExecutor

    from distributed.core import rpc

    async def identity() -> dict:
        args = security.get_connection_args("client") if security else {}
        async with rpc(address, connection_args=args, timeout=CONNECT_S) as scheduler:
            return await asyncio.wait_for(scheduler.identity(), CONNECT_S)
    hint = "start one with `dask scheduler`, or check --scheduler / DASK_SCHEDULER_ADDRESS"
    with ThreadPoolExecutor(1) as thread:  # (a loop of its own, whatever runs in this thread)
        try:
            reply = thread.submit(asyncio.run, identity()).result()
        except (OSError, asyncio.TimeoutError, ValueError) as error:
            detail = ": ".join(filter(None, (type(error).__name__, str(error))))
            raise SchedulerNotFound(f"no Dask scheduler answered at {address} within "
                                    f"{CONNECT_S:g} s ({detail}); {hint}") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise SchedulerNotFound(f"{address} answered, but not as a Dask scheduler; {hint}")


def start_local(num_devices: int, device_memory_mb: int = 0, stream=sys.stdout,
                plain: bool = False, profiled: bool = False) -> Cluster:
    """A local cluster of `num_devices` workers: one per GPU, or CPU processes standing in; over
    TLS with a throwaway certificate unless `plain`; with Dask's profiler on the workers if
    `profiled` (`--profile`'s report shows it)."""
    tls = local_cluster_tls(plain)
    key = ("local", num_devices, device_memory_mb, tls, profiled)
    if key in _STARTED:
        return _STARTED[key].refreshed()
    import dask
    from distributed import Client

    gpus = gpu_count()
    if gpus and num_devices > gpus:
        raise TooFewGPUs(f"-ll:gpu {num_devices}: this machine has {gpus} GPU"
                         f"{'' if gpus == 1 else 's'}; ask for {gpus} or fewer")
    config = {**CLUSTER_CONFIG, "distributed.worker.profile.enabled": profiled}
    with dask.config.set(config):
        if gpus:
            owned = _gpu_cluster(num_devices, device_memory_mb, tls)
        else:
            print(f"GPUs were not found: starting {num_devices} CPU worker "
                  f"{'process' if num_devices == 1 else 'processes'}, one per requested device.",
                  file=stream)
            owned = _cpu_cluster(num_devices, tls, config)
        client = Client(owned, set_as_default=False)
    lifetime.close_on_interrupt(close_all)
    client.wait_for_workers(num_devices)
    cluster = _listed(client, None, owned)
    print(f"Dask {dashboard(client)}", file=stream)
    _STARTED[key] = cluster
    return cluster


def _gpu_cluster(num_devices: int, device_memory_mb: int, tls: bool):
    """A dask_cuda LocalCUDACluster on loopback (its scheduler and nannies run in this process,
    and its workers get the throwaway certificate from it in memory; they end with this process,
    Dask's worker processes exiting when their nanny's pipe closes)."""
    from dask_cuda import LocalCUDACluster
    from distributed.security import Security

    return LocalCUDACluster(n_workers=num_devices, dashboard_address="127.0.0.1:0",
                            security=Security.temporary() if tls else None,
                            scheduler_kwargs=SCHEDULER_OPTIONS, preload=[lifetime.__name__],
                            **_transport(tls), **_memory_pools(LocalCUDACluster, device_memory_mb))


def _transport(tls: bool) -> dict:
    """UCX (distributed-ucxx) for a plain GPU cluster where it is installed: its connections
    carry GPU memory, so what the devices send each other goes from GPU to GPU
    (scheduler/parcels.py); TCP or TLS copy it through the host. UCX does not encrypt, so a
    cluster with TLS keeps TLS."""
    if tls or importlib.util.find_spec("distributed_ucxx") is None:
        return {}
    return {"protocol": "ucxx"}


def _cpu_cluster(num_devices: int, tls: bool, config: dict):
    """Single-threaded CPU worker processes on loopback, started as `dask spec` commands, so they
    never import the user's `__main__`: a LocalCluster's worker processes are spawned from this
    one and run the main script again, which a script without an `if __name__ == "__main__":`
    guard cannot survive."""
    from distributed.worker_memory import parse_memory_limit

    from .local_processes import LocalProcessCluster

    return LocalProcessCluster(
        num_devices, tls, config, silence_logs=logging.ERROR,
        scheduler_options={"dashboard": True, "dashboard_address": "127.0.0.1:0",
                           **SCHEDULER_OPTIONS},
        worker_options={"nthreads": 1, "silence_logs": logging.ERROR,
                        "env": single_threaded_blas(),
                        "memory_limit": parse_memory_limit("auto", 1, num_devices,
                                                        logger=logging.getLogger(__name__))})


def _memory_pools(cluster_class, device_memory_mb: int) -> dict:
    """LocalCUDACluster's options for GPU memory: with RMM installed, a pool of `-ll:fsize` MB
    (or, no size given, CUDA's own asynchronous pool), which CuPy and torch both allocate from
    where dask-cuda can set that up (ops/vendor.py's kernels use both). Without RMM, none:
    dask-cuda refuses a pool it cannot make, and `-ll:fsize` still sets the memory the plan may
    use per GPU (deployment.gpu_memory)."""
    import importlib.util
    import inspect
    if importlib.util.find_spec("rmm") is None:
        return {}
    options: dict = {"rmm_pool_size": f"{device_memory_mb}MB"} if device_memory_mb else {}
    if "rmm_allocator_external_lib_list" in inspect.signature(cluster_class).parameters:
        options.setdefault("rmm_async", not device_memory_mb)
        libraries = ["cupy"] + (["torch"] if importlib.util.find_spec("torch") else [])
        options["rmm_allocator_external_lib_list"] = libraries
    return options


def single_threaded_blas() -> dict[str, str]:
    """Each worker stands in for one device on a shared CPU: one BLAS thread apiece."""
    return {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


@atexit.register
def close_all() -> None:
    """Close every cluster this process connected to or started."""
    for cluster in _STARTED.values():
        try:
            cluster.close()
        except Exception:  # already closed or the loop is gone at exit
            pass
    _STARTED.clear()
