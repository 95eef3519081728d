"""`--recovery-interval auto`: the journal copies the training state every 10 updates at first,
then as seldom as keeps its copies to 2% of the training time between them (up to 256); a
given interval stays as given; 0 (or no cluster) keeps no journal."""

import pytest

from flexflow import recovery
from flexflow.core import FFConfig


class FakeRun:
    """What a journal asks of a run: `read_state`, which takes `copy_s` of the fake clock."""

    def __init__(self, clock, copy_s: float):
        self.clock, self.copy_s = clock, copy_s
        self.executor = None

    def read_state(self, executor):
        self.clock[0] += self.copy_s
        return "state"


def trained(journal, run, clock, updates: int, update_s: float) -> list[int]:
    """Intervals seen at each copy while `updates` updates of `update_s` each are made."""
    seen = []
    for _ in range(updates):
        if journal._due():
            journal._copy_if_due(run)
            seen.append(journal.interval)
        clock[0] += update_s
        journal.updated()
    return seen


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(recovery.time, "monotonic", lambda: now[0])
    return now


def test_an_adaptive_interval_keeps_the_copies_to_their_share(clock):
    run = FakeRun(clock, copy_s=0.4)  # AlexNet's copy, against 0.26 s updates
    seen = trained(recovery.Journal(10, adaptive=True), run, clock, 400, update_s=0.26)
    assert seen[:2] == [10, 77]  # 0.4 / (0.02 x 0.26) = 76.9
    assert all(interval == 77 for interval in seen[1:])


def test_a_cheap_copy_keeps_the_least_interval_and_a_dear_one_the_most(clock):
    cheap = trained(recovery.Journal(10, adaptive=True), FakeRun(clock, 0.001), clock, 100, 0.1)
    assert set(cheap) == {10}
    dear = trained(recovery.Journal(10, adaptive=True), FakeRun(clock, 60.0), clock, 600, 0.01)
    assert dear[1:] == [256] * (len(dear) - 1)


def test_a_given_interval_stays_as_given(clock):
    seen = trained(recovery.Journal(3), FakeRun(clock, 10.0), clock, 30, 0.01)
    assert set(seen) == {3} and len(seen) == 10


@pytest.mark.parametrize("flag, cluster, expected", [
    ([], True, (10, True)), (["--recovery-interval", "4"], True, (4, False)),
    (["--recovery-interval", "0"], True, None), ([], False, None)])
def test_the_flag_decides_the_journal(flag, cluster, expected):
    class Run:
        model = type("Model", (), {"ffconfig": FFConfig(argv=flag)})
    Run.cluster = object() if cluster else None
    journal = recovery.Journal.for_run(Run)
    assert (journal and (journal.interval, journal.adaptive)) == expected
