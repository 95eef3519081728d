"""The torch.distributed process groups of a model's workers, on which its buckets of gradients
are summed (scheduler/collectives.py): gloo on CPU workers, NCCL on GPU workers. Dask keeps
everything else (placement, programs, windows, liveness); a collective here costs tens to
hundreds of microseconds where a Dask message costs milliseconds.

Rendezvous goes through Dask: the client asks the first device's worker to open a TCPStore
(torch.distributed's key-value server) on its host (`open_store`) and hands its address and a
random prefix to every worker, which joins, under the prefix, one process group per set of devices
that sum buckets together and one per set that gathers partials (`join`, all workers at once: a
group forms when all its members have joined; every worker joins its groups in one sorted order, so
none waits for a group another has not reached). The gathers of batch norm's statistics have groups
of their own so as not to queue behind a bucket's sum on the same devices (a group runs its
collectives one after another). The store and the groups are the model's: a model deployed again
(after a lost worker) forms new ones on the workers that remain, and closing the model closes them
(`leave`). The TCPStore and gloo do not encrypt or authenticate; the prefix, sent over Dask's
connection (TLS where the cluster uses it), keeps others from finding the model's keys in the
store.

A wait on a group cannot be interrupted: gloo's blocks until the work is done or the group's
timeout has passed, and a timed-out wait breaks the group. So the waits run on a waiter thread
of the device, and the program waits for their event while its Dask task is wanted (so a
cancelled iteration ends at once, as with messages: `push.Cancelled`); a wait left behind by a
cancelled iteration ends with the group's timeout or the process.
"""

from __future__ import annotations

import asyncio
import datetime
import importlib
import queue
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from .push import POLL_S, Cancelled

TIMEOUT = datetime.timedelta(minutes=30)  # torch.distributed's default
AMID_WORK_ROUNDS = 8  # bursts of work, each then a sum, per block that `time_amid_work` times
_STORES: dict[str, Any] = {}        # model id -> the TCPStore this worker serves (first device)
_MEMBERSHIPS: dict[tuple[str, int], "TorchCommunicator"] = {}  # (model id, device)


@dataclass(frozen=True)
class Rendezvous:
    """Where a model's workers meet: the TCPStore's host and port, and the model's prefix."""

    host: str
    port: int
    prefix: str


def available() -> bool:
    """Whether torch.distributed can form process groups here."""
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available()


def new_prefix(model_id: str) -> str:
    return f"{model_id}/{secrets.token_hex(16)}/"


def open_store(model_id: str, world: int, dask_worker=None) -> tuple[str, int]:
    """Serve a TCPStore for `world` workers on this worker's host; (host, port)."""
    from distributed.comm.addressing import get_address_host
    from torch.distributed import TCPStore

    host = get_address_host(dask_worker.address)
    store = TCPStore(host, 0, world, is_master=True, timeout=TIMEOUT, wait_for_workers=False)
    _STORES[model_id] = store
    return host, store.port


Group = tuple[tuple[int, ...], bool]  # (member devices, whether it shares partials)


async def join(model_id: str, device: int, meeting: Rendezvous, world: int,
               groups: list[Group], cuda: bool, dask_worker=None) -> None:
    """Join the model's process groups that hold `device` (`groups`, sorted), off the
    worker's event loop, which must keep answering meanwhile."""
    from distributed.comm.addressing import get_address_host

    host = get_address_host(dask_worker.address)
    communicator = await asyncio.to_thread(
        _joined, device, meeting, world, [g for g in groups if device in g[0]], cuda, host)
    _MEMBERSHIPS[(model_id, device)] = communicator


def _joined(device: int, meeting: Rendezvous, world: int, groups: list[Group], cuda: bool,
            host: str) -> "TorchCommunicator":
    import torch.distributed as dist

    store = dist.TCPStore(meeting.host, meeting.port, world, is_master=False, timeout=TIMEOUT,
                          wait_for_workers=False)
    made = {}
    for members, gathers in groups:
        name = "-".join(map(str, members)) + ("/partials/" if gathers else "/buckets/")
        made[(members, gathers)] = _process_group(dist.PrefixStore(meeting.prefix + name, store),
                                                  members.index(device), len(members), cuda,
                                                  host)
    return TorchCommunicator(made, store, cuda)


def _process_group(store, rank: int, size: int, cuda: bool, host: str):
    import torch.distributed as dist

    if cuda:
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = TIMEOUT
        return dist.ProcessGroupNCCL(store, rank, size, options)
    options = dist.ProcessGroupGloo._Options()
    options._devices = [dist.ProcessGroupGloo.create_device(hostname=host)]
    options._timeout = TIMEOUT
    return dist.ProcessGroupGloo(store, rank, size, options)


def membership(model_id: str, device: int) -> "TorchCommunicator":
    return _MEMBERSHIPS[(model_id, device)]


def leave(model_id: str) -> None:
    """Drop this worker's groups and store of the model."""
    for key in [k for k in _MEMBERSHIPS if k[0] == model_id]:
        _MEMBERSHIPS.pop(key).close()
    _STORES.pop(model_id, None)


def time_collectives(communicator: "TorchCommunicator", members: tuple[int, ...],
                     sizes: tuple[int, ...], runs: int) -> dict[int, float]:
    """The median ms of an all-reduce of each of `sizes` bytes over `members`, each run `runs`
    times after one to warm up: calibration's measure of the collectives (run on every member
    at once)."""
    import statistics
    import time

    medians = {}
    for nbytes in sizes:
        array = communicator._xp.ones(max(nbytes // 4, 1), "float32")
        times = []
        for _ in range(runs + 1):
            start = time.perf_counter()
            communicator.launch("calibration", array, members)
            communicator.result("calibration")
            times.append((time.perf_counter() - start) * 1e3)
        medians[nbytes] = statistics.median(times[1:])
    return medians


def time_amid_work(communicator: "TorchCommunicator", members: tuple[int, ...],
                   make_work: Callable[[], Callable[[], None]], runs: int,
                   rounds: int = AMID_WORK_ROUNDS) -> float:
    """The ms a small sum over `members` really costs where, as in an iteration, every member
    computes before it: `rounds` bursts of `make_work()`'s work each followed by the sum, less
    the same bursts back to back, per round (the median of `runs` such pairs, run on every
    member at once). Members finish their work apart (a host shares its cores out in turns),
    and the sum waits for the last; timed with every member idle, it does not."""
    import statistics
    import time

    work = make_work()
    array = communicator._xp.ones(1, "float32")

    def sum_once():
        communicator.launch("calibration", array, members)
        communicator.result("calibration")
    extra = []
    for _ in range(runs + 1):
        sum_once()  # the members start each block together
        start = time.perf_counter()
        for _ in range(rounds):
            work()
        alone = time.perf_counter() - start
        sum_once()
        start = time.perf_counter()
        for _ in range(rounds):
            work()
            sum_once()
        extra.append((time.perf_counter() - start - alone) * 1e3 / rounds)
    return max(0.0, statistics.median(extra[1:]))


@dataclass
class _Pending:
    result: Any  # the array summed in place, or the list of arrays gathered into
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class TorchCommunicator:
    """One device's end of its model's process groups (`groups`, by `Group`)."""

    def __init__(self, groups: dict[Group, Any], store, cuda: bool):
        self.groups, self._store, self._cuda = groups, store, cuda
        self._xp = importlib.import_module("cupy" if cuda else "numpy")
        self.wanted: Callable[[], bool] = lambda: True  # set by each program that runs here
        self._pending: dict[str, _Pending] = {}
        self._waits: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._wait_each, name="flexflow-collective-waits",
                         daemon=True).start()

    def launch(self, key: str, array, members: tuple[int, ...], gather: bool = False,
               partials: bool = False) -> None:
        """Start the sum of `array` over `members` (in place), or with `gather` its
        all-gather into new arrays of its shape; on the group of the partials' collectives
        with `partials`."""
        if self._cuda:  # the collective runs on the group's stream, after CuPy's queued work
            import cupy
            cupy.cuda.get_current_stream().synchronize()
        group = self.groups[(members, partials)]
        if gather:
            arrays = [self._xp.empty_like(array) for _ in members]
            work = group.allgather([[self._tensor(a) for a in arrays]], [self._tensor(array)])
            pending = self._pending[key] = _Pending(arrays)
        else:
            work = group.allreduce([self._tensor(array)])
            pending = self._pending[key] = _Pending(array)
        self._waits.put((work, pending))

    def _tensor(self, array):
        import torch
        return torch.from_dlpack(array) if self._cuda else torch.from_numpy(array)

    def result(self, key: str):
        """The sum (in the array that was launched), or the gathered arrays, once the group
        has made them."""
        pending = self._pending.pop(key)
        while not pending.done.wait(POLL_S):
            if not self.wanted():
                raise Cancelled(f"the iteration was cancelled while this device waited for "
                                f"the collective {key}")
        if pending.error is not None:
            raise pending.error
        return pending.result

    def _wait_each(self) -> None:
        while True:
            work, pending = self._waits.get()
            if work is None:
                return
            try:
                work.wait()
            except Exception as error:  # a member lost, or the group closed
                pending.error = error
            pending.done.set()

    def close(self) -> None:
        """Stop the waiter and shut the groups down, off the caller's thread (the worker's
        event loop): a group with a wait on a member that stopped answering blocks there."""
        self._waits.put((None, None))
        threading.Thread(target=_shut_down, args=(list(self.groups.values()),), daemon=True,
                         name="flexflow-process-groups-shutdown").start()


def _shut_down(groups: list) -> None:
    for group in groups:
        try:
            group.shutdown()
        except Exception:  # already broken (a member lost)
            pass
