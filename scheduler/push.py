"""Worker-to-worker delivery of what one device's fused group sends another, without the scheduler.

Why: on the Dask distributed scheduler a task that needs the output of a task on another worker
waits for three messages in turn (the producer's "finished" to the scheduler, the scheduler's
order to the consumer, the consumer's fetch from the producer): about 8 ms on a loaded 2-core
host (`bench/hop_latency.py`), as much as a large layer's kernel. A strategy that splits layers
pays that at every layer. So each device runs its share of an iteration as one Dask task, and a
fused group's output for another device is written straight to that device's worker: one message.
The consumer's task takes it from a `Mailbox` there.

A program that waits must not outlive its Dask task: the client cancels an iteration's tasks
when one of them fails or a worker leaves, and a waiting program notices within `POLL_S` and
raises `Cancelled`, so no worker thread is left blocked.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Callable

from .parcels import Parcel

HANDLER = "flexflow_deliver"  # the worker handler that takes deliveries
POLL_S = 0.2  # how often a waiting program checks that its Dask task is still wanted


class Cancelled(RuntimeError):
    """The Dask task running a device's program was cancelled while the program waited."""


class _Arrivals:
    """The parcels one group sent one device in one iteration: the messages posted early
    (`actions.sent_early`) and the group's closing parcel, which says how many there are in
    all (parcels between two workers may travel on different connections, out of order)."""

    __slots__ = ("items", "parcels", "expected")

    def __init__(self):
        self.items: list = []
        self.parcels = 0
        self.expected: int | None = None

    @property
    def complete(self) -> bool:
        return self.parcels == self.expected


class Mailbox:
    """Deliveries to one device of one model, keyed (iteration, sending group)."""

    def __init__(self):
        self._items: dict[tuple[int, str], _Arrivals] = {}
        self._arrived = threading.Condition()

    def put(self, iteration: int, source: str, items, parcels: int | None = 1) -> None:
        """One parcel of what `source` sent; `parcels`, on the closing one, how many make
        the delivery (None on a message posted early)."""
        with self._arrived:
            arrivals = self._items.setdefault((iteration, source), _Arrivals())
            arrivals.items += items
            arrivals.parcels += 1
            if parcels is not None:
                arrivals.expected = parcels
            if arrivals.complete:
                self._arrived.notify_all()

    def take(self, iteration: int, source: str, wanted: Callable[[], bool]) -> list:
        """What `source` sent for `iteration`; waits for all of it while `wanted()` holds."""
        key = (iteration, source)
        with self._arrived:
            while key not in self._items or not self._items[key].complete:
                if not wanted():
                    raise Cancelled(f"iteration {iteration} was cancelled while this device "
                                    f"waited for {source}")
                self._arrived.wait(POLL_S)
            return self._items.pop(key).items

    def drop_before(self, iteration: int) -> None:
        """Forget deliveries of earlier iterations (those a cancelled iteration left)."""
        with self._arrived:
            for key in [k for k in self._items if k[0] < iteration]:
                del self._items[key]


def task_wanted(worker) -> Callable[[], bool]:
    """Whether the Dask task this thread runs is still to be computed (not cancelled)."""
    from distributed.worker import thread_state
    key = thread_state.key

    def wanted() -> bool:
        task = worker.state.tasks.get(key)
        return task is not None and task.state == "executing"
    return wanted


def post(worker, address: str, items: list, **message) -> concurrent.futures.Future:
    """Send `items` (in a `Parcel`) and `message` to the worker at `address` from a task's
    thread; does not wait for it to be sent. The receiver does not reply: an acknowledgement
    would be one more message for both event loops, and a program waiting for it would end
    a round trip later (a lost receiver is noticed by the client, as a lost worker)."""
    from distributed.protocol import to_serialize
    message["items"] = to_serialize(Parcel(items))

    async def send():
        await getattr(worker.rpc(address), HANDLER)(reply=False, **message)
    return asyncio.run_coroutine_threadsafe(send(), worker.loop.asyncio_loop)


def settle(sent: list[concurrent.futures.Future], wanted: Callable[[], bool]) -> None:
    """Wait until every posted message has been sent (raising a failed send's error)."""
    for future in sent:
        while True:
            try:
                future.result(timeout=POLL_S)
                break
            except concurrent.futures.TimeoutError:
                if not wanted():
                    raise Cancelled("the iteration was cancelled while this device sent")
