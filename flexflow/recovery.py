"""Training that goes on when a Dask worker is lost.

A worker that dies takes its device's weights, optimizer state and activations with it. So a
model trained on a cluster keeps, on the host, a copy of its training state (checkpoint.capture)
taken every `--recovery-interval` updates, and a journal of what it asked of the devices since:
executor calls with the batch and counters each one saw, and weight writes. When a call finds a
worker gone (`WorkerLost`), the model is planned again on the workers that remain (searched again
if the run searched, else data parallel: FFModel._deploy), the copy is restored, the journal is
played again in order (those calls' metrics were counted the first time and are dropped), and the
call that failed is made again. Every call computes the same numbers given the same weights,
batch and counters (dropout masks hash the step), so the run goes on as if nothing had been lost,
up to the order of floating-point sums on a different number of devices.

With no worker left, the last copy is written to a checkpoint file and `ClusterLost` says where.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import checkpoint
from .scheduler.cluster import WorkerLost

CALLS_PER_UPDATE = 4  # forward, zero_gradients, backward, update: a low-level loop's iteration


class WorkerLostWarning(RuntimeWarning):
    """A worker was lost and training went on without it."""


class ClusterLost(RuntimeError):
    """No worker of the cluster remains; the training state was saved first."""


@dataclass
class Call:
    """One request to the devices, with what it read from the model: the fed batches (copied:
    an attached array may be refilled in place) and the counters."""

    action: Callable  # action(executor) -> the executor's result
    feeds: dict[int, np.ndarray]
    training: bool
    step: int
    updates: int

    @classmethod
    def of(cls, model, action: Callable) -> "Call":
        ctx = model._ctx
        return cls(action, {t: np.array(a) for t, a in model._feeds.items()}, ctx.training,
                   ctx.step, ctx.updates)

    def enter(self, model) -> None:
        """Put the batches and counters back as they were when the call was first made."""
        ctx = model._ctx
        ctx.training, ctx.step, ctx.updates = self.training, self.step, self.updates
        model._feeds.clear()
        model._feeds.update(self.feeds)


class Journal:
    """The host copy of the training state and the calls made since it was taken."""

    def __init__(self, interval: int):
        self.interval = interval
        self.state: checkpoint.TrainingState | None = None
        self.calls: list[Call] = []
        self.updates = 0  # updates since the copy

    @classmethod
    def for_run(cls, model) -> "Journal | None":
        """A journal for a model that trains on a cluster, unless --recovery-interval 0."""
        interval = model._ffconfig.recovery_interval
        return cls(interval) if model._cluster_in_use and interval > 0 else None

    def perform(self, model, action: Callable, record: bool = True):
        """`action(model._executor)`, recovering from lost workers; `record`: played again
        after a recovery (calls that change device state), else just retried (reads)."""
        call = Call.of(model, action)
        while True:
            try:
                self._copy_if_due(model)
                result = action(model._executor)
                break
            except WorkerLost as lost:
                self._recover(model, lost, call)
        if record:
            self.calls.append(call)
        return result

    def updated(self) -> None:
        """An update was applied (the model's counters already count it)."""
        self.updates += 1

    def _copy_if_due(self, model) -> None:
        due = (self.state is None or self.updates >= self.interval
               or len(self.calls) >= CALLS_PER_UPDATE * self.interval)
        if due:
            self.state = checkpoint.capture(model)
            self.calls.clear()
            self.updates = 0

    def _recover(self, model, lost: WorkerLost, call: Call) -> None:
        """Plan again on the workers that remain, restore the copy, play the journal again, and
        leave the model as `call` found it."""
        since = f"update {self.state.updates}" if self.state else "compile"
        warn_lost(lost, f"going back to the training state of {since} and {len(self.calls)} "
                        f"call(s) after it")
        cluster = remaining(model, model._cluster_in_use)
        model._deploy(cluster, None)
        if self.state is None:  # lost before the first copy: the weights compile made
            model._initialize_weights()
        else:
            position = model._fit_position
            checkpoint.restore(model, self.state, "the recovery copy")
            model._resume_at, model._fit_position = None, position
        for past in self.calls:
            past.enter(model)
            past.action(model._executor)
        call.enter(model)


def warn_lost(lost: WorkerLost, during: str) -> None:
    warnings.warn(WorkerLostWarning(f"{lost}; {during}: planning again on the workers that "
                                    f"remain and going on"), stacklevel=4)


def remaining(model, cluster):
    """The cluster's workers now (the first -ll:gpu x --nodes of them when a scheduler address
    was given). None left: save the last copy of the training state and raise ClusterLost."""
    config = model._ffconfig
    limit = config.workers_per_node * config.num_nodes if config.scheduler_address else None
    cluster = cluster.refreshed(limit or None)
    if cluster.workers:
        return cluster
    journal = model._journal
    path = f"flexflow-recovery-{time.strftime('%Y%m%d-%H%M%S')}.npz"
    if journal is not None and journal.state is not None:
        checkpoint.save(path, journal.state, model)
        where = (f"the training state of update {journal.state.updates} was saved to {path}; "
                 f"load it with FFModel.load_checkpoint on a working cluster")
    else:
        where = "there was no copy of the training state to save"
    print(f"No Dask worker remains; {where}", file=sys.stderr)
    raise ClusterLost(f"no Dask worker remains in the cluster; {where}")
