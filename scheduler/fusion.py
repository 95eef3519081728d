"""Fusion ("few hops"), the one grouping the executor runs and the simulator schedules.

Every task gets an epoch, the number of cross-device dependencies on its longest path, and a
lane, its micro-batch where a layer gives its device several sample parts (a pipeline stage,
`taskgraph.Partition.lane`); the tasks of one device with the same epoch and lane run as one
group, in graph order. A stage then sends each micro-batch on as soon as it is done, and the next
stage works on it while this one runs the next (GPipe's schedule: every stage runs its
micro-batches' forwards in lane order, then their backwards, whose lanes come after).
Without micro-batches every lane is 0. A data-parallel iteration is
then: forward+backward on each device (epoch 0), each weight shard's gradient pieces to its
owner and its update there (epoch 1; under the non-finite guard the owners exchange their
sums' verdicts first, and update at epoch 2), the new shards to the other holders (the next
epoch). One device is always a single group per phase.

Groups run in the order of (epoch, device, lane), every group after those it reads from. A group
*receives* the output of a group on another device the first time its device needs that output,
and only waits for (*after*) one its device has already received, and for the group before it
on its device. A task that awaits a collective (scheduler/collectives.py) depends on every
member's launch: it *follows* the groups of the launches, which send it nothing (the
collective moves the data); it comes in a later epoch than those on other devices.

`fuse` groups a list of tasks (the executor's, and the full simulation's); the delta simulation
(`simulator.Simulator.simulate`) assembles groups from memoised segments, placing their tasks
with the same `place_of` and linking the groups with the same `link`.
"""

from __future__ import annotations

from collections import defaultdict
from functools import reduce
from operator import itemgetter
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from .taskgraph import Task, TaskKey

Place = tuple[int, int, int]  # (device, epoch, lane): the group a task falls in
LOAD = "load"  # the kind of the tasks that load an input tensor, which belong to no layer
LAUNCHES = ("allreduce", "gather", "shareshard")  # the kinds of the tasks that launch a
#                                                   collective


def naming_key(first: TaskKey, key: TaskKey) -> TaskKey:
    """The key a group is named after, given the one chosen so far and its next task's: its
    first task of a model layer (a group that starts by loading its batch is named after the
    layer that reads it), or its first load when it only loads."""
    return key if first.kind == LOAD and key.kind != LOAD else first


@dataclass(frozen=True)
class Group:
    """Tasks fused into one group: run on `device` in order, after what `receive_from` sent."""

    name: str
    device: int
    tasks: tuple[Task, ...]
    receive_from: tuple[str, ...]  # names of the groups whose data for this device come here
    after: tuple[str, ...]         # names of the other groups this one must follow
    follows: tuple[str, ...] = ()  # names of the groups of the launches of what it awaits
    releases: tuple = ()  # per task, what its device drops after it (scheduler/last_use.py)


# Where one group stands among the others, as indices into the ordered groups: (those whose
# output it receives, those it only waits for, those of the collectives' launches it awaits).
# A plain tuple: the search links every group of every proposal.
Link = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def group_name(first: TaskKey, place: Place) -> str:
    """A group's name: its naming task's layer and kind, its device, its epoch and its lane."""
    device, epoch, lane = place
    return f"{first.layer}-{first.kind}-d{device}e{epoch}" + (f"l{lane}" if lane else "")


def place_of(device: int, lane: int, deps: Iterable[TaskKey], places: Mapping[TaskKey, Place]
             ) -> tuple[Place, list[Place], list[Place]]:
    """(the place, the places on other devices it reads from, in order, and those of the
    collectives' launches it awaits, on every member's device, its own too) of a task on
    `device` in micro-batch `lane` (`Task.lane`) that depends on the tasks `deps`, placed at
    `places`. Its lane is the highest of its own and those of the tasks on its device, in its
    epoch, that it depends on: a group never waits for a later group of its device."""
    epoch, sources, launches, later = 0, [], [], ()
    for dep in deps:
        source = places[dep]
        launched = dep.kind in LAUNCHES
        if launched:
            launches.append(source)
        if source[0] == device:
            if source[1] > epoch:
                epoch = source[1]
            if source[2] > lane:  # (rare: only micro-batches have lanes)
                later += (source,)
            continue
        if not launched:
            sources.append(source)
        if source[1] >= epoch:
            epoch = source[1] + 1
    for source in later:
        if source[1] == epoch and source[2] > lane:
            lane = source[2]
    return (device, epoch, lane), sources, launches


def link(groups: Mapping[Place, tuple[Iterable[Place], tuple[Place, ...]]]
         ) -> tuple[list[Place], list[Link]]:
    """The groups' order and links. `groups`: for each place, the places on other devices its
    tasks read from, each once, in the order its tasks first read them, and (a tuple) those of
    the collectives' launches its tasks await.

    A group follows the launches of every member of what it awaits but itself: the members of
    a collective then follow one and the same tuple of groups, which the simulator's schedule
    waits for once (a device's own launch ended before the group before it on its device, so
    following it changes nothing). Each distinct tuple is resolved to indices once: a
    collective of n members is awaited by n groups."""
    ordered = sorted(groups, key=itemgetter(1, 0, 2))
    index = {g: i for i, g in enumerate(ordered)}
    received: dict[int, set[Place]] = defaultdict(set)  # device -> groups whose output it has
    previous: dict[int, int] = {}
    resolved: dict[tuple[Place, ...], tuple[int, ...]] = {}
    links = []
    for g in ordered:
        device = g[0]
        sources, launches = groups[g]
        have = received[device]
        receive_from, after = [], []
        for source in sources:
            if source in have:
                after.append(index[source])
            else:
                receive_from.append(index[source])
                have.add(source)
        if device in previous:
            after.append(previous[device])
        here = previous[device] = index[g]
        follows = resolved.get(launches)
        if follows is None:
            follows = resolved[launches] = tuple(index[launch] for launch in launches)
        if here in follows:  # it launches what it awaits: it does not wait for itself
            follows = tuple(j for j in follows if j != here)
        links.append((tuple(receive_from), tuple(after), follows))
    return ordered, links


def fuse(tasks: Sequence[Task]) -> list[Group]:
    """Group `tasks` (a topologically ordered subset of a TaskGraph) by (device, epoch, lane),
    in the order of (epoch, device, lane): every group comes after those it receives from or
    follows."""
    place: dict[TaskKey, Place] = {}
    members: dict[Place, list[Task]] = defaultdict(list)
    reads: dict[Place, list[Place]] = defaultdict(list)
    awaited: dict[Place, list[Place]] = defaultdict(list)
    for task in tasks:
        where, sources, launches = place_of(task.device, task.lane,
                                            [d for d in task.deps if d in place], place)
        place[task.key] = where
        members[where].append(task)
        reads[where] += sources
        awaited[where] += launches
    ordered, links = link({g: (dict.fromkeys(reads[g]), tuple(dict.fromkeys(awaited[g])))
                           for g in members})
    names = [group_name(reduce(naming_key, (t.key for t in members[g])), g) for g in ordered]
    return [Group(name, g[0], tuple(members[g]), tuple(names[i] for i in receive_from),
                  tuple(names[i] for i in after), tuple(names[i] for i in follows))
            for name, g, (receive_from, after, follows) in zip(names, ordered, links)]
