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
from typing import Mapping, Sequence

from ..ops.box import Box
from ..ops.graph import Graph
from . import actions as A
from .fusion import Group

VALUE, GRAD = "value", "grad"
Rows = tuple[int, int]  # a range of a tensor's dim 0 (its samples)
# (VALUE or GRAD, tensor, rows): drop this device's pieces of it, all of them (rows None) or
# those within `rows`
Release = tuple[str, int, Rows | None]


class Released(LookupError):
    """A host read of a tensor's value or gradient that the last run dropped at its last use."""

    def __init__(self, kind: str, tensor: int):
        super().__init__(f"the {kind} of tensor {tensor} was dropped at its last use")
        self.kind, self.tensor = kind, tensor


def frees_at_last_use(phases: Sequence[str]) -> bool:
    """Whether a run of `phases` computes a whole iteration at once (module docstring)."""
    return "forward" in phases and "loss" in phases


def reads(action: A.Action, graph: Graph, forwards: Mapping[tuple[int, int], A.Forward]
          ) -> tuple[list[tuple[int, Box]], list[tuple[int, Box]]]:
    """((tensor, box) of the values, (tensor, box) of the gradients) `action` reads from its
    device's store; `forwards`: each (layer, part)'s Forward action, whose boxes its backward
    reads."""
    kind = type(action)
    if kind is A.ForwardPartial:
        action, kind = action.forward, A.Forward
    if kind is A.Forward:
        return list(zip(graph.layers[action.layer].inputs, action.in_boxes)), []
    if kind is A.Backward or kind is A.BackwardPartial:
        forward, layer = forwards[(action.layer, action.part)], graph.layers[action.layer]
        grads = list(zip(layer.outputs, forward.out_boxes))
        if kind is A.Backward and action.recompute:  # it runs the layer's forward again first
            return list(zip(layer.inputs, forward.in_boxes)), grads
        return [], grads
    if kind is A.Loss:
        return [(action.output, action.box), (action.label, action.label_box)], []
    if kind is A.Send:
        return ([], [(action.tensor, action.box)]) if action.grad else (
            [(action.tensor, action.box)], [])
    return [], []


def outputs(graph: Graph) -> frozenset[int]:
    """The model's outputs: tensors a layer produces and no layer reads."""
    read = {t for layer in graph.layers for t in layer.inputs}
    return frozenset(t for layer in graph.layers for t in layer.outputs if t not in read)


def with_releases(groups: list[Group], graph: Graph) -> list[Group]:
    """`groups` (fused, in run order), each given its `releases`: after its task i, what the
    task was the last on its device to read, and the rows of a tensor (a micro-batch's) that
    no later task on its device reads (`_releases`)."""
    kept = outputs(graph)
    forwards = {(t.action.layer, t.action.part): t.action for group in groups
                for t in group.tasks if type(t.action) is A.Forward}
    read_at: dict[tuple[int, str, int], list[tuple[tuple[int, int], Rows | None]]] = {}
    for g, group in enumerate(groups):
        for i, task in enumerate(group.tasks):
            values, grads = reads(task.action, graph, forwards)
            for what, found in ((VALUE, values), (GRAD, grads)):
                for tensor, box in found:
                    if what == GRAD or tensor not in kept:
                        read_at.setdefault((group.device, what, tensor), []).append(
                            ((g, i), box.bounds[0] if box.bounds else None))
    per_task: dict[tuple[int, int], list[Release]] = {}
    for (_, what, tensor), found in read_at.items():
        for where, release_ in _releases(what, tensor, found):
            per_task.setdefault(where, []).append(release_)
    return [replace(group, releases=tuple(tuple(per_task.get((g, i), ()))
                                          for i in range(len(group.tasks))))
            for g, group in enumerate(groups)]


def _releases(what: str, tensor: int, found: list[tuple[tuple[int, int], Rows | None]]):
    """(where, release) of one tensor's value or gradient on one device, from its reads
    (`found`: where, rows, in run order): everything after the last read; the rows of an
    earlier read after it where no later read meets them (a pipeline's micro-batch, once its
    backward is done: what 1F1B's memory relies on)."""
    last = found[-1][0]
    out = []
    for n, (where, rows) in enumerate(found):
        if where == last or rows is None:
            continue
        later = [r for w, r in found[n + 1:] if w != where]
        if all(r is not None and (r[1] <= rows[0] or rows[1] <= r[0]) for r in later):
            out.append((where, (what, tensor, rows)))
    return out + [(last, (what, tensor, None))]


def release(store, releases: Sequence[Release]) -> None:
    """Drop from a device's store what `releases` name, noting what it dropped whole."""
    for what, tensor, rows in releases:
        if rows is None:
            store.released.add((what, tensor))
        stores = (store.values,) if what == VALUE else (store.grads, store.received_grads)
        for pieces in stores:
            if rows is None:
                pieces.pop(tensor, None)
            elif tensor in pieces:
                pieces[tensor] = [(box, array) for box, array in pieces[tensor]
                                  if not rows[0] <= box.bounds[0][0] < box.bounds[0][1] <= rows[1]]
