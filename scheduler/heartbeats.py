"""Telling a stalled worker from a busy one, by its heartbeats.

A Dask worker tells the scheduler it is there every half second or so (more seldom in large
clusters), from its event loop, which runs beside its tasks; the scheduler notes when
(`last_seen`). A worker that is stopped (SIGSTOP), hung or cut off stops doing so, but the
scheduler keeps listing it for its `worker-ttl` (5 minutes by default), and a task pinned to it
or a `Client.run` on it would wait all that time. So the client remembers each worker's last
heartbeat as the scheduler reports it and since when, by its own clock (the two clocks need not
agree); a worker whose heartbeat has not changed for STALL_S is stalled: it is removed from the
cluster, so that it cannot come back into a run that has gone on without it, and treated as
lost.
"""

from __future__ import annotations

import logging
import time

STALL_S = 10.0  # a worker not heard from for this long is stalled (twenty heartbeats or more)

logger = logging.getLogger(__name__)


class Heartbeats:
    """Each worker's last heartbeat seen, and when this process first saw it."""

    def __init__(self):
        self._seen: dict[str, tuple[float, float]] = {}

    def stalled(self, listed: dict[str, dict], now: float) -> set[str]:
        """The workers of `listed` (the scheduler's identities) silent for STALL_S at `now`
        (time.monotonic)."""
        stalled = set()
        for worker, identity in listed.items():
            beat = identity.get("last_seen")
            seen = self._seen.get(worker)
            if seen is None or seen[0] != beat:
                self._seen[worker] = (beat, now)
            elif now - seen[1] > STALL_S:
                stalled.add(worker)
        return stalled


_HEARTBEATS = Heartbeats()


def responsive(client, listed: dict[str, dict]) -> dict[str, dict]:
    """`listed` without the stalled workers, which are removed from the cluster."""
    stalled = _HEARTBEATS.stalled(listed, time.monotonic())
    for worker in sorted(stalled):
        logger.warning("Dask worker %s has not been heard from for %.0f s: removing it",
                       worker, STALL_S)
        client.sync(client.scheduler.unregister, address=worker,
                    stimulus_id=f"flexflow-stalled-{time.time()}", close=True)
    return {worker: identity for worker, identity in listed.items() if worker not in stalled}
