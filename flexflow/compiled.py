"""CompiledRun: what `FFModel.compile()` makes, and all that running it changes.

FFModel builds (layers, tensors, flags, optimizer); compile fixes what training optimises (the
objective and the loss kernel) and hands the model to a CompiledRun, which deploys it
(`deployment.deploy`: strategy, task graph, executor, profiler, on the cluster in use) and from
then on owns the state that running changes: the devices' weights and optimizer state (through
the executor), the step and update counters, fit's position, and the recovery journal, which
may deploy it again on fewer workers.

Nothing outside holds a part of that state. Each run is given its iteration's values as one
frozen `IterationState` (`iteration` makes it from the batches fed and the mode), passed to the
executor as it is, and kept by the journal to make the run again after a lost worker.
checkpoint.py uses `capture` and `restore`, recovery.py `read_state` and `restore`; the host
reads and writes of weights and tensors go through `perform`.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Callable, Mapping, Sequence

import numpy as np

from . import checkpoint, nonfinite, recovery
from .deployment import Deployment, deploy, update_rule
from .scheduler.actions import IterationState
from .scheduler.cluster import WorkerLost
from .scheduler.executor import Executor
from .scheduler.feeds import Rows
from .scheduler.taskgraph import Objective


WINDOW_LIMIT = 64  # iterations of a window at the most (a fit's progress moves by windows)


class CompiledRun:
    """A compiled model on its devices. `fit_position` is fit's (epoch, iterations done in it),
    kept with the training state; `restore` sets where the next fit starts (`resume_point`)."""

    def __init__(self, model, objective: Objective, loss, cluster, strategy: dict | None,
                 initial_weights: Callable[[], dict], previous: Executor | None = None):
        """`model`: the FFModel (its graph, flags and optimizer are read as they are at each
        use); `initial_weights()`: the whole weights compile creates, by (owner layer, index);
        `previous`: the executor of the model's earlier compile, closed once this one is
        planned."""
        self.model, self.objective, self.loss = model, objective, loss
        self._initial_weights = initial_weights
        self._step = self._updates = 0
        self.fit_position = (0, 0)
        self._resume_at: tuple[int, int] | None = None
        self._kept_by_first = kept_by_first_partition(model.graph)
        self._level = True  # whether every holder of those weights has the first's values
        self._journal: recovery.Journal | None = None
        self._deployment = self._deploy(cluster, strategy, True, previous)
        self._journal = recovery.Journal.for_run(self)
        self._recovering(lambda executor: self.initialize_weights())

    # ---- read-only views ------------------------------------------------------------------------
    @property
    def strategy(self) -> dict:
        """Layer name -> ParallelConfig, as deployed (searched again after a lost worker)."""
        return self._deployment.strategy

    @property
    def executor(self):
        """The executor of the current deployment (host reads and writes go through
        `perform`, which recovers from lost workers)."""
        return self._deployment.executor

    @property
    def profiler(self):
        """--profiling's OpProfiler, or None."""
        return self._deployment.profiler

    @property
    def cluster(self):
        """The Dask cluster trained on; None in this process."""
        return self._deployment.cluster

    @property
    def journal(self) -> recovery.Journal | None:
        """The recovery journal, on a cluster (flexflow/recovery.py); None in this process."""
        return self._journal

    @property
    def step(self) -> int:
        """Iterations run (dropout masks hash it)."""
        return self._step

    @property
    def updates(self) -> int:
        """Optimizer steps taken (Adam's bias correction)."""
        return self._updates

    # ---- running --------------------------------------------------------------------------------
    def iteration(self, feeds: Mapping[int, np.ndarray], training: bool,
                  ahead: int = 0) -> IterationState:
        """The state of the next run (or of the one `ahead` updates after it): these batches
        (the mapping copied, so later feeds do not change it), this mode, the counters as they
        will be and the optimizer's rule now."""
        return IterationState(dict(feeds), self._step + ahead, self._updates + ahead, training,
                              update_rule(self.model.optimizer))

    def run(self, phases: tuple[str, ...], state: IterationState,
            zero_gradients: bool = False) -> list[dict]:
        """Run `phases` on `state`; returns the metric pieces (timings and the guard's records
        taken out). A run that updates counts an update; `NonFiniteError` if it trained on a
        value that is not finite (flexflow/nonfinite.py)."""
        self._bring_level(phases, state.training)
        state = self._for_journal(state)
        pieces = self.perform(lambda executor: executor.run(*phases, state=state,
                                                            zero_gradients=zero_gradients))
        return self._finish(phases, pieces, state)

    def window_length(self) -> int:
        """How many iterations the next `run_window` may run: one in this process, with
        --profiling, or where the non-finite guard could not go back (no recovery journal);
        else up to WINDOW_LIMIT, and no further than the next copy of the training state."""
        if self.cluster is None or self.profiler is not None:
            return 1
        if self._journal is None:
            return WINDOW_LIMIT if self.model.ffconfig.allow_nonfinite else 1
        return min(WINDOW_LIMIT, self._journal.updates_to_copy())

    def run_window(self, phases: tuple[str, ...], feeds: Sequence[Mapping], training: bool,
                   zero_gradients: bool, each: Callable[[list], None]) -> None:
        """Run `phases` once per batch set of `feeds` (`window_length()` of them at most) as
        one window: on a cluster, one program per device runs them all. `each(pieces)` is
        given every iteration's metric pieces in turn, as `run` returns them. An iteration the
        non-finite guard stops is made again alone, after the devices are put back as they
        were before the window and the iterations before it are run again, so it raises as
        it would have."""
        self._bring_level(phases, training)
        if len(feeds) <= 1:
            for batches in feeds:
                each(self.run(phases, self.iteration(batches, training), zero_gradients))
            return
        counted = "update" in phases
        states = [self._for_journal(self.iteration(batches, training, k if counted else 0))
                  for k, batches in enumerate(feeds)]

        def window(executor):
            return executor.run_window(phases, states, zero_gradients)
        results = self.perform(window, record=False)
        stop = next((k for k, pieces in enumerate(results)
                     if nonfinite.stops(self, phases, pieces)), None)
        if stop is not None:
            self._journal.rewind(self)
            self.run_window(phases, feeds[:stop], training, zero_gradients, each)
            each(self.run(phases, self.iteration(feeds[stop], training), zero_gradients))
            return
        if self._journal is not None:
            self._journal.record(window)
        for state, pieces in zip(states, results):
            each(self._finish(phases, pieces, state))

    def _bring_level(self, phases: tuple[str, ...], training: bool) -> None:
        """Weights that only the first partition of each box keeps current (batch norm's
        running statistics) go stale on the box's other holders while training runs. Before an
        inference pass reads them there, every holder gets the first's, read from it (the
        box's owner): DDP's broadcast_buffers, once per switch from training to inference."""
        if "forward" not in phases or not self._kept_by_first:
            return
        if training:
            self._level = False
        elif not self._level:
            shapes = self._kept_by_first
            self.perform(lambda executor: executor.set_weights(executor.get_weights(shapes)))
            self._level = True

    def _for_journal(self, state: IterationState) -> IterationState:
        """`state` as the journal keeps it: an attached array may be refilled before a replay,
        so its host batches are copied (the rows of a data set are kept as they are)."""
        if self._journal is None:
            return state
        return replace(state, feeds={t: feed if isinstance(feed, Rows) else np.array(feed)
                                     for t, feed in state.feeds.items()})

    def _finish(self, phases: tuple[str, ...], pieces: list[dict],
                state: IterationState) -> list[dict]:
        """A run's metric pieces without timings and the guard's records; counts its update."""
        if self.profiler:
            pieces = self.profiler.take(pieces, state.training)
        pieces = nonfinite.check(self, phases, pieces, state)
        if "update" in phases:
            self._updates += 1
            self._step += 1
            if self._journal is not None:
                self._journal.updated()
        return pieces

    def perform(self, action: Callable, record: bool = True):
        """`action(executor)`; on a cluster, through the recovery journal, so that a lost worker
        is recovered from (`record`: the action changes device state and is played again after
        a recovery; reads are just retried)."""
        if self._journal is None:
            return action(self.executor)
        return self._journal.perform(self, action, record)

    def _recovering(self, action: Callable):
        """`action(executor)`; on a cluster, made again after a lost worker is recovered from
        (for what must not take a copy of the training state first: the weights compile sets,
        and the copy itself)."""
        if self._journal is None:
            return action(self.executor)
        return self._journal.recovering(self, action)

    def release(self, data_sets) -> None:
        """The workers may drop their copies of these `feeds.DataSet`s (a fit has ended)."""
        self.executor.release(data_sets)

    # ---- training state -------------------------------------------------------------------------
    def capture(self) -> checkpoint.TrainingState:
        """A host-side copy of the training state (format: flexflow/checkpoint.py), read
        again after a lost worker is recovered from."""
        return self._recovering(self.read_state)

    def read_state(self, executor: Executor) -> checkpoint.TrainingState:
        """The training state as `executor`'s devices hold it now, with a copy of the
        optimizer (its hyper-parameters now, which a later call may change)."""
        shapes = {ref: spec.shape for ref, spec in checkpoint.weight_specs(self.model).items()}
        weights = executor.get_weights(shapes)
        optimizer = {ref: slots for ref, slots in
                     executor.get_optimizer_states(shapes).items() if slots}
        epoch, iteration = self.fit_position
        return checkpoint.TrainingState(weights, optimizer, self._step, self._updates, epoch,
                                        iteration, dict(self.strategy),
                                        copy.copy(self.model.optimizer))

    def restore(self, state: checkpoint.TrainingState, source: str = "training state",
                resume: bool = True) -> None:
        """Put `state`'s weights and optimizer state on the devices, checked whole first.
        `resume`: also its counters and position, where the next fit starts (a checkpoint's);
        recovery keeps the run's own."""
        checkpoint.check_fits(self.model, state, source)
        specs = checkpoint.weight_specs(self.model)
        self.executor.set_weights(state.weights)
        self.executor.set_optimizer_state({ref: state.optimizer.get(ref, {}) for ref in specs})
        if resume:
            self._step, self._updates = int(state.step), int(state.updates)
            self.fit_position = self._resume_at = (int(state.epoch), int(state.iteration))

    def resume_point(self) -> tuple[int, int]:
        """Where a fit starts: a restored state's position, once, else the beginning."""
        point, self._resume_at = self._resume_at or (0, 0), None
        return point

    def initialize_weights(self) -> None:
        """The weights compile created, on the devices."""
        self.executor.set_weights(self._initial_weights())

    def redeploy(self, cluster) -> None:
        """Deploy again on `cluster` (what remains of the one in use), replacing the executor;
        the devices start empty."""
        self._deployment = self._deploy(cluster, None, False, self.executor)

    def _deploy(self, cluster, strategy: dict | None, first: bool,
                previous: Executor | None) -> Deployment:
        """`deployment.deploy`; workers lost while it plans are left out and the plan made
        again as after any lost worker (searched again if the run searches, else data
        parallel, on the workers that remain)."""
        while True:
            try:
                return deploy(self.model, self.objective, self.loss, cluster, strategy, first,
                              previous)
            except WorkerLost as lost:
                recovery.fatal_if_scheduler_lost(self, lost)
                recovery.warn_lost(lost, "planning")
                cluster = recovery.remaining(self, cluster)
                strategy, first = None, False


def kept_by_first_partition(graph) -> dict[tuple[int, int], tuple[int, ...]]:
    """The shape of every weight, by (owner layer, index), that only the first partition of
    each of its boxes keeps current (`Operator.first_partition_weights`)."""
    return {(layer.weight_owner, k): layer.weights[k].shape for layer in graph.layers
            for k in layer.op.first_partition_weights()}


def require_compiled(model, what: str) -> CompiledRun:
    """`model`'s CompiledRun, or the error saying `what` needs one."""
    if model.compiled is None:
        raise RuntimeError(f"{what}() needs a compiled model; call compile() first")
    return model.compiled
