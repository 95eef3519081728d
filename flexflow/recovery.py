"""Training that goes on when a Dask worker is lost.

A worker that dies takes its device's weights, optimizer state and activations with it. So a
model trained on a cluster keeps, on the host, a copy of its training state
(CompiledRun.read_state) taken every `--recovery-interval` updates, and a journal of what it
asked of the devices since: runs, each with the frozen IterationState (batch, counters, update
rule) it ran on, and weight writes. When a call finds a worker gone (`WorkerLost`), the model
is planned again on the workers that remain (searched again if the run searched, else data
parallel: deployment.deploy), the copy's weights and optimizer state are restored, the journal
is played again in order (those calls' metrics were counted the first time and are dropped),
and the call that failed is made again; a worker lost during the recovery starts it over on the
workers left. Every call to the devices goes through the journal, compile's weight
initialisation and save_checkpoint's capture too. Every call computes the same numbers given
the same weights, batch and counters (dropout masks hash the step), so the run goes on as if
nothing had been lost, up to the order of floating-point sums on a different number of devices.

With no worker left, or no scheduler (`SchedulerLost`), the last copy is written to a
checkpoint file, with the optimizer's hyper-parameters as they were when it was taken, and
`ClusterLost` says where.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from typing import Callable

from . import checkpoint
from .scheduler.cluster import SchedulerLost, WorkerLost

CALLS_PER_UPDATE = 4  # forward, zero_gradients, backward, update: a low-level loop's iteration
AUTO_LEAST, AUTO_MOST = 10, 256  # --recovery-interval auto: the updates between copies, at most
AUTO_SHARE = 0.02  # the share of the training time its copies may take


class WorkerLostWarning(RuntimeWarning):
    """A worker was lost and training went on without it."""


class ClusterLost(RuntimeError):
    """No worker of the cluster remains; the training state was saved first."""


class Journal:
    """The host copy of the training state and the calls made since it was taken, each an
    `action(executor)` holding what it read (a run holds its frozen IterationState). With
    `adaptive` (`--recovery-interval auto`) the interval grows from its first value as far as
    keeps the copies (timed) to AUTO_SHARE of the training time between them, up to
    AUTO_MOST: a large model's copy takes a large share of a short interval."""

    def __init__(self, interval: int, adaptive: bool = False):
        self.interval = self.least = interval
        self.adaptive = adaptive
        self.state: checkpoint.TrainingState | None = None
        self.calls: list[Callable] = []
        self.updates = 0  # updates since the copy
        self._copied = 0.0  # when the copy was done (time.monotonic)

    @classmethod
    def for_run(cls, run) -> "Journal | None":
        """A journal for a CompiledRun on a cluster, unless --recovery-interval 0."""
        interval = run.model.ffconfig.recovery_interval
        if interval == "auto":
            return cls(AUTO_LEAST, adaptive=True) if run.cluster else None
        return cls(interval) if run.cluster and interval > 0 else None

    def perform(self, run, action: Callable, record: bool = True):
        """`action(run.executor)`, recovering from lost workers, after the copy of the training
        state if one is due; `record`: played again after a recovery (calls that change device
        state), else just retried (reads)."""
        def copied_first(executor):
            self._copy_if_due(run)
            return action(executor)
        result = self.recovering(run, copied_first)
        if record:
            self.calls.append(action)
        return result

    def recovering(self, run, action: Callable):
        """`action(run.executor)`, made again after each recovery until it completes on the
        workers that remain (ClusterLost when none remain)."""
        while True:
            try:
                return action(run.executor)
            except WorkerLost as lost:
                self._recover(run, lost)

    def record(self, action: Callable) -> None:
        """Add a call made outside `perform` (a window, once it is known to stand)."""
        self.calls.append(action)

    def updated(self) -> None:
        """An update was applied (the run's counters already count it)."""
        self.updates += 1

    def updates_to_copy(self) -> int:
        """Updates the next call may make before a copy of the training state is due (the
        copy due now is taken as it starts)."""
        return self.interval if self._due() else self.interval - self.updates

    def rewind(self, run) -> None:
        """Put the devices back as the journal has them: the copy's state and the calls after
        it (a window's last calls are made again one by one, to stop where they must)."""
        try:
            self._replay(run)
        except WorkerLost as lost:
            self._recover(run, lost)

    def _due(self) -> bool:
        return (self.state is None or self.updates >= self.interval
                or len(self.calls) >= CALLS_PER_UPDATE * self.interval)

    def _copy_if_due(self, run) -> None:
        if self._due():
            started = time.monotonic()
            self.state = run.read_state(run.executor)
            copied = time.monotonic()
            if self.adaptive and self.updates:
                per_update = (started - self._copied) / self.updates
                self.interval = min(AUTO_MOST, max(self.least, math.ceil(
                    (copied - started) / (AUTO_SHARE * max(per_update, 1e-9)))))
            self._copied = copied
            self.calls.clear()
            self.updates = 0

    def _recover(self, run, lost: WorkerLost) -> None:
        """Deploy again on the workers that remain, restore the copy's device state (the run
        keeps its counters and position) and play the journal again; a worker lost meanwhile
        starts it over on fewer workers."""
        while True:
            fatal_if_scheduler_lost(run, lost)
            since = f"update {self.state.updates}" if self.state else "compile"
            warn_lost(lost, f"going back to the training state of {since} and "
                            f"{len(self.calls)} call(s) after it")
            try:
                run.redeploy(remaining(run, run.cluster))
                self._replay(run)
                return
            except WorkerLost as again:
                lost = again

    def _replay(self, run) -> None:
        if self.state is None:  # before the first copy: the weights compile made
            run.initialize_weights()
        else:
            run.restore(self.state, "the recovery copy", resume=False)
        for past in self.calls:
            past(run.executor)


def fatal_if_scheduler_lost(run, lost: WorkerLost) -> None:
    """A lost scheduler leaves nothing to plan again on: save_and_raise at once."""
    if isinstance(lost, SchedulerLost):
        save_and_raise(run, str(lost))


def warn_lost(lost: WorkerLost, during: str) -> None:
    warnings.warn(WorkerLostWarning(f"{lost}; {during}: planning again on the workers that "
                                    f"remain and going on"), stacklevel=4)


def remaining(run, cluster):
    """The cluster's workers now (the first -ll:gpu x --nodes of them when a scheduler address
    was given). None left: save the last copy of the training state and raise ClusterLost."""
    config = run.model.ffconfig
    limit = config.workers_per_node * config.num_nodes if config.scheduler_address else None
    try:
        cluster = cluster.refreshed(limit or None)
    except SchedulerLost as lost:
        save_and_raise(run, str(lost))
    if cluster.workers:
        return cluster
    save_and_raise(run, "no Dask worker remains in the cluster")


def save_and_raise(run, loss: str):
    """After the `loss` of the whole cluster: save the last copy of the training state and
    raise ClusterLost, saying where it went."""
    journal = run.journal
    path = f"flexflow-recovery-{time.strftime('%Y%m%d-%H%M%S')}.npz"
    if journal is not None and journal.state is not None:
        checkpoint.save(path, journal.state, run.model)
        where = (f"the training state of update {journal.state.updates} was saved to {path}; "
                 f"load it with FFModel.load_checkpoint on a working cluster")
    else:
        where = "there was no copy of the training state to save"
    print(f"{loss[0].upper()}{loss[1:]}; {where}", file=sys.stderr)
    raise ClusterLost(f"{loss}; {where}")
