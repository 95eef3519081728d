"""Where each device drops an activation or an activation's gradient: right after the last task
of the run that reads it there, as PyTorch's autograd frees what no later operation needs.

A training step then holds at once only the activations its backward still needs (what each
forward's `saved` keeps refers to them) and the gradients not yet consumed, instead of every
value and gradient of the iteration. The releases are worked out once per program from the fused
groups, in the order each device runs them, which is the same in both executors; the memory
model (`simulator.peak_memory`) walks the same releases.

Runs that compute a whole iteration at once free at last use: a training step (`train_step`,
`fit`, traced loops) and an evaluation (forward and loss). Phases run by themselves
(`forward()`, `backward()`, `update()` one by one) keep every value until the next forward
starts, since the host may read any of them in between (`get_tensor`, `get_gradients`), and so do
the non-finite guard's inspections. The model's outputs (tensors no layer reads) are always kept:
the host reads the predictions. A host read of what a run dropped raises `Released`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..ops.graph import Graph
from . import actions as A
from .fusion import Group

VALUE, GRAD = "value", "grad"
Release = tuple[str, int]  # (VALUE or GRAD, tensor): drop this device's pieces of it


class Released(LookupError):
    """A host read of a tensor's value or gradient that the last run dropped at its last use."""

    def __init__(self, kind: str, tensor: int):
        super().__init__(f"the {kind} of tensor {tensor} was dropped at its last use")
        self.kind, self.tensor = kind, tensor


def frees_at_last_use(phases: Sequence[str]) -> bool:
    """Whether a run of `phases` computes a whole iteration at once (module docstring)."""
    return "forward" in phases and "loss" in phases


def reads(action: A.Action, graph: Graph) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(tensors whose values, tensors whose gradients) `action` reads from its device's store."""
    kind = type(action)
    if kind is A.Forward:
        return graph.layers[action.layer].inputs, ()
    if kind is A.ForwardPartial:
        return graph.layers[action.forward.layer].inputs, ()
    if kind is A.Backward:  # a recomputing one runs the layer's forward again first
        return (graph.layers[action.layer].inputs if action.recompute else (),
                graph.layers[action.layer].outputs)
    if kind is A.BackwardPartial:
        return (), graph.layers[action.layer].outputs
    if kind is A.Loss:
        return (action.output, action.label), ()
    if kind is A.Send:
        return ((), (action.tensor,)) if action.grad else ((action.tensor,), ())
    return (), ()


def outputs(graph: Graph) -> frozenset[int]:
    """The model's outputs: tensors a layer produces and no layer reads."""
    read = {t for layer in graph.layers for t in layer.inputs}
    return frozenset(t for layer in graph.layers for t in layer.outputs if t not in read)


def with_releases(groups: list[Group], graph: Graph) -> list[Group]:
    """`groups` (fused, in run order), each given its `releases`: after its task i, what the
    task was the last on its device to read."""
    kept = outputs(graph)
    last: dict[tuple[int, str, int], tuple[int, int]] = {}
    for g, group in enumerate(groups):
        for i, task in enumerate(group.tasks):
            values, grads = reads(task.action, graph)
            for tensor in values:
                if tensor not in kept:
                    last[(group.device, VALUE, tensor)] = (g, i)
            for tensor in grads:
                last[(group.device, GRAD, tensor)] = (g, i)
    per_task: dict[tuple[int, int], list[Release]] = {}
    for (_, kind, tensor), where in last.items():
        per_task.setdefault(where, []).append((kind, tensor))
    return [replace(group, releases=tuple(tuple(per_task.get((g, i), ()))
                                          for i in range(len(group.tasks))))
            for g, group in enumerate(groups)]


def release(store, releases: Sequence[Release]) -> None:
    """Drop from a device's store what `releases` name, noting that it did."""
    store.released.update(releases)
    for kind, tensor in releases:
        if kind == VALUE:
            store.values.pop(tensor, None)
        else:
            store.grads.pop(tensor, None)
            store.received_grads.pop(tensor, None)
