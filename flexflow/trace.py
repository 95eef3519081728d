"""A hand-written training loop's iteration as one run: the calls between `begin_trace` and
`end_trace`.

FlexFlow scripts that write their own loop call `forward()`, `zero_gradients()`, `backward()`
and `update()` once an iteration, between `ffconfig.begin_trace(id)` and `end_trace(id)`
(Legion records the iteration's tasks once and replays them). On a cluster each call is a round
trip (its Dask graph, each device's program, the wait for them). Inside a trace a model only
notes each call with the batches fed at that moment, and makes them when the trace ends, or
sooner when anything asks the model for its state (`FFModel.compiled`): an iteration's forward,
zero_gradients, backward and update (zero_gradients first or second) on the same batches become
one training step, one program per device, and backward's `[Metrics]` line is printed then.
Other sequences are made call by call, in order, as they would have been.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Mapping

# the orders of a hand-written iteration that run as one training step
TRAINING_STEP_ORDERS = (("forward", "zero_gradients", "backward", "update"),
                        ("zero_gradients", "forward", "backward", "update"))


@dataclass(frozen=True)
class Call:
    """One deferred call: what it was and the batches fed when it was made."""

    name: str                # forward, zero_gradients, backward or update
    feeds: Mapping           # a copy of the model's fed batches then
    training: bool           # the model's mode then (a forward's own `training`, resolved)


class Trace:
    """The calls one model has deferred while its config traces; `making` while the model
    makes them (they are not deferred again)."""

    def __init__(self):
        self.calls: list[Call] = []
        self.making = False

    def take(self) -> list[tuple[bool, list[Call]]]:
        """The deferred calls, cut into the pieces to make, in order, each with whether it is a
        training step: each training step whole, every other call alone. The trace is then
        empty (so making them defers nothing again)."""
        calls, self.calls = self.calls, []
        pieces, start = [], 0
        while start < len(calls):
            four = calls[start:start + 4]
            step = is_training_step(four)
            pieces.append((step, four if step else [calls[start]]))
            start += 4 if step else 1
        return pieces


def is_training_step(calls: list[Call]) -> bool:
    """Whether `calls` are one iteration of a hand-written training loop on one set of
    batches, with forward in training mode."""
    if tuple(c.name for c in calls) not in TRAINING_STEP_ORDERS:
        return False
    forward, backward = (next(c for c in calls if c.name == name)
                         for name in ("forward", "backward"))
    same_batches = (forward.feeds.keys() == backward.feeds.keys()
                    and all(backward.feeds[t] is fed for t, fed in forward.feeds.items()))
    return same_batches and forward.training


_MODELS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # FFConfig -> its models


def watch(config, model) -> None:
    """`model` defers calls while `config` traces, and makes them when the trace ends."""
    _MODELS.setdefault(config, weakref.WeakSet()).add(model)


def trace_ended(config) -> None:
    for model in list(_MODELS.get(config, ())):
        model._settle()
