"""A worker whose heartbeat the scheduler has not seen change for heartbeats.STALL_S is
stalled; one that keeps beating, however busy, is not."""

from flexflow.scheduler import heartbeats
from flexflow.scheduler.heartbeats import STALL_S, Heartbeats


def test_a_silent_worker_is_stalled_once_the_bound_has_passed():
    seen = Heartbeats()
    assert seen.stalled({"a": {"last_seen": 1.0}, "b": {"last_seen": 1.0}}, now=100.0) == set()
    assert seen.stalled({"a": {"last_seen": 9.0}, "b": {"last_seen": 1.0}},
                        now=100.0 + STALL_S / 2) == set()
    assert seen.stalled({"a": {"last_seen": 19.0}, "b": {"last_seen": 1.0}},
                        now=100.0 + STALL_S + 1) == {"b"}
    assert seen.stalled({"a": {"last_seen": 19.0}, "b": {"last_seen": 30.0}},
                        now=100.0 + 2 * STALL_S) == set()  # it beats again


class Scheduler:
    def __init__(self):
        self.unregistered = []

    def unregister(self, address, stimulus_id, close):
        self.unregistered.append(address)


class Client:
    """What `responsive` uses of a distributed.Client."""

    def __init__(self):
        self.scheduler = Scheduler()

    def sync(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)


class Clock:
    """heartbeats' `time`, at the given moments in turn."""

    def __init__(self, *moments: float):
        self._moments = iter(moments)

    def monotonic(self) -> float:
        return next(self._moments)

    def time(self) -> float:
        return 0.0


def test_a_stalled_worker_is_removed_from_the_cluster(monkeypatch):
    monkeypatch.setattr(heartbeats, "_HEARTBEATS", Heartbeats())
    monkeypatch.setattr(heartbeats, "time", Clock(0.0, STALL_S + 1))
    client = Client()
    listed = {"tcp://a": {"last_seen": 5.0}, "tcp://b": {"last_seen": 5.0}}
    assert heartbeats.responsive(client, listed) == listed
    assert heartbeats.responsive(client, {**listed, "tcp://a": {"last_seen": 6.0}}) == {
        "tcp://a": {"last_seen": 6.0}}
    assert client.scheduler.unregistered == ["tcp://b"]
