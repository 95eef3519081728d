"""Checkpoints: what a run needs to go on exactly where it stopped, in memory and in a file.

`capture(model)` takes a host-side copy of a compiled FFModel's state (every weight, batch-norm
running statistics included, the optimizer's slots, the counters that seed dropout masks and
Adam's bias correction, and fit's position); `restore(model, state)` puts it back into a model
built from the same script, under any strategy and on any number of devices: weights and slots
are held whole here and sliced again into the boxes the target's strategy places. Training after
a restore gives the same numbers as training that never stopped.

`save(path, state, model)` / `load(path, model)` (`FFModel.save_checkpoint` /
`load_checkpoint`) keep that state in a file: a NumPy `.npz` archive (a zip of `.npy` arrays,
read with pickling off; see `archive.py`), written atomically to exactly `path` (through
`<path>.partial`, synced to disk before it is renamed over `path`; a save that fails, by a full
disk, an I/O error or an interrupt, removes its `.partial`, leaves the checkpoint already at
`path` untouched and re-raises; a `.partial` left by a process killed mid-save is removed by the
next save and never read), holding

* `__checkpoint__`: a 0-d string array, JSON metadata:
  `{"format": "flexflow.checkpoint", "version": 1, "step": S, "updates": U, "epoch": E,
  "iteration": I, "strategy": {"layers": {...}}, "optimizer": {"type": "AdamOptimizer",
  "hyperparameters": {"alpha": ..., ...}} or null, "weights": [{"layer": "Conv2D_100", "index": 0,
  "name": "kernel", "shape": [4, 2, 3, 3], "dtype": "float32", "slots": ["m", "v"]}, ...]}`.
  `strategy` is the one the run used, in the JSON strategy-file form
  (`scheduler/strategy_file.py`), for information: loading restores into any strategy;
* `weights/<layer name>/<index>`: each weight, whole, of the layers that own weights (a shared
  weight is stored once, under its owner);
* `optimizer/<layer name>/<index>/<slot>`: the optimizer's state of that weight, whole (`v` for
  SGD with momentum, `m` and `v` for Adam); absent before the weight's first update.

Loading checks the whole file against the model before changing anything: format and version,
every weight of the model present by layer name and index and nothing else, names, shapes and
dtypes as the model declares them (each array's `.npy` header is checked before its data is
read), the optimizer of the same type with the same hyper-parameter names and slots. Any problem
raises `CheckpointError` naming the file and the entry. The file's optimizer hyper-parameters
(a scheduled learning rate, say) replace the model's, and the next `fit` resumes at the saved
epoch and iteration.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field

import numpy as np

from . import compiled
from .archive import Archive, write
from .scheduler import strategy_file
from .scheduler.strategy import ParallelConfig, StrategyError

FORMAT, VERSION = "flexflow.checkpoint", 1
METADATA = "__checkpoint__"
MAX_METADATA_CHARS = 1 << 24
MAX_COUNTER = 1 << 62

WeightRef = tuple[int, int]  # (owner layer index, weight index)


class CheckpointError(ValueError):
    """A checkpoint (a file, or a TrainingState) does not fit the model or is malformed; the
    message names the file and the offending entry."""


@dataclass
class TrainingState:
    weights: dict[WeightRef, np.ndarray]                 # whole arrays, every weight
    optimizer: dict[WeightRef, dict[str, np.ndarray]]    # whole slots; absent: no state yet
    step: int                                            # iterations run (dropout seeds)
    updates: int                                         # optimizer steps (Adam's bias term)
    epoch: int = 0                                       # fit's position: the epoch and
    iteration: int = 0                                   # the iterations done in it
    strategy: dict[str, ParallelConfig] = field(default_factory=dict)  # informative
    settings: object = None  # the optimizer as captured (a copy); None: the model's now


def weight_specs(model) -> dict[WeightRef, object]:
    """Every weight the model's graph has, keyed by its owner layer and index: its WeightSpec."""
    return {(layer.index, k): spec for layer in model.graph.layers
            if layer.weight_owner == layer.index for k, spec in enumerate(layer.weights)}


def capture(model) -> TrainingState:
    """A host-side copy of a compiled model's training state."""
    return compiled.require_compiled(model, "capture").capture()


def restore(model, state: TrainingState, source: str = "training state") -> None:
    """Put `state` into a compiled model of the same layers (any strategy, any device count);
    the next `fit` continues from the state's position. Checked whole before anything changes."""
    compiled.require_compiled(model, "restore").restore(state, source)


def check_fits(model, state: TrainingState, source: str) -> None:
    """A CheckpointError unless `state` holds exactly the model's weights, in their shapes."""
    specs = weight_specs(model)
    names = {ref: f"weight {ref[1]} of layer '{model.graph.layers[ref[0]].name}'"
             for ref in specs}
    missing = [names[ref] for ref in specs if ref not in state.weights]
    if missing:
        raise CheckpointError(f"{source}: no value for {', '.join(missing)}")
    extra = sorted(set(state.weights) - set(specs)) + sorted(set(state.optimizer) - set(specs))
    if extra:
        raise CheckpointError(f"{source}: weights {extra} (owner layer, index) that the model "
                              f"does not have")
    for ref, spec in specs.items():
        arrays = [("", state.weights[ref])] + [
            (f" optimizer slot '{slot}' of", array)
            for slot, array in state.optimizer.get(ref, {}).items()]
        for what, array in arrays:
            if tuple(np.shape(array)) != tuple(spec.shape):
                raise CheckpointError(f"{source}:{what} {names[ref]} has shape "
                                      f"{tuple(np.shape(array))}, the model's is {spec.shape}")
    if min(state.step, state.updates, state.epoch, state.iteration) < 0:
        raise CheckpointError(f"{source}: negative counters (step {state.step}, updates "
                              f"{state.updates}, epoch {state.epoch}, iteration "
                              f"{state.iteration})")


# ---- files --------------------------------------------------------------------------------------
def save(path, state: TrainingState, model):
    """Write `state`, captured from `model` (whose layers name the arrays), to `path`, with
    the hyper-parameters of the optimizer as the state captured it (else the model's now).
    Returns the path. A write that fails leaves the file at `path` as it was, and no
    `<path>.partial`, and re-raises (`archive.write`)."""
    check_fits(model, state, "training state")
    layers = model.graph.layers
    arrays, entries = {}, []
    for ref, spec in weight_specs(model).items():
        name = layers[ref[0]].name
        slots = state.optimizer.get(ref, {})
        entries.append({"layer": name, "index": ref[1], "name": spec.name,
                        "shape": list(spec.shape), "dtype": str(np.dtype(spec.dtype)),
                        "slots": sorted(slots)})
        arrays[_weight_entry(name, ref[1])] = state.weights[ref]
        for slot, array in slots.items():
            arrays[_slot_entry(name, ref[1], slot)] = array
    optimizer = model.optimizer if state.settings is None else state.settings
    metadata = {"format": FORMAT, "version": VERSION, "step": state.step,
                "updates": state.updates, "epoch": state.epoch, "iteration": state.iteration,
                "strategy": json.loads(strategy_file.dumps_json(state.strategy)),
                "optimizer": None if optimizer is None else {
                    "type": type(optimizer).__name__,
                    "hyperparameters": _hyperparameters(optimizer)},
                "weights": entries}
    return write(path, {METADATA: np.array(json.dumps(metadata)), **arrays})


def load(path, model) -> TrainingState:
    """Check the checkpoint at `path` against the compiled model, then restore it (and the
    optimizer's hyper-parameters). Returns the state read."""
    run = compiled.require_compiled(model, "load_checkpoint")
    with Archive(path, CheckpointError, "checkpoint") as archive:
        reader = _Reader(archive, model)
        state, hyperparameters = reader.state()
    run.restore(state, str(path))
    for name, value in hyperparameters.items():
        setattr(model.optimizer, name, value)
    return state


def _weight_entry(layer: str, index: int) -> str:
    return f"weights/{layer}/{index}"


def _slot_entry(layer: str, index: int, slot: str) -> str:
    return f"optimizer/{layer}/{index}/{slot}"


def _hyperparameters(optimizer) -> dict:
    """The optimizer's settings (its dataclass fields but the model it belongs to)."""
    if not dataclasses.is_dataclass(optimizer):
        return {}
    return {f.name: getattr(optimizer, f.name) for f in dataclasses.fields(optimizer)
            if f.name != "ffmodel"}


def _finite(value: int | float) -> bool:
    """Whether a JSON number is finite as a float (an integer of 400 digits is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


class _Reader:
    """Reads and checks one checkpoint file against a model; every problem a CheckpointError."""

    def __init__(self, archive: Archive, model):
        self.archive, self.model = archive, model
        self.source = str(archive.path)

    def fail(self, message: str):
        raise CheckpointError(f"{self.source}: {message}")

    def state(self) -> tuple[TrainingState, dict]:
        meta = self.metadata()
        counters = [self.counter(meta, key) for key in ("step", "updates", "epoch", "iteration")]
        try:
            strategy = strategy_file.loads_json(json.dumps(meta.get("strategy")),
                                                '"strategy"')
        except (StrategyError, OverflowError, RecursionError) as error:  # int(1e400), nesting
            raise CheckpointError(f"{self.source}: the strategy is malformed ({error})") from None
        hyperparameters, slots = self.optimizer(meta.get("optimizer"))
        entries = self.entries(meta.get("weights"), slots)
        self.check_members(entries)
        weights, optimizer = {}, {}
        for ref, (layer, spec, entry) in entries.items():
            what = f"weight {ref[1]} ({spec.name}) of layer '{layer}'"
            weights[ref] = self.archive.array(_weight_entry(layer, ref[1]), spec.shape,
                                              spec.dtype, what)
            if entry["slots"] and self.model.optimizer is not None:
                optimizer[ref] = {slot: self.archive.array(
                    _slot_entry(layer, ref[1], slot), spec.shape, spec.dtype,
                    f"optimizer slot '{slot}' of {what}") for slot in entry["slots"]}
        return TrainingState(weights, optimizer, *counters, strategy), hyperparameters

    def metadata(self) -> dict:
        if METADATA not in self.archive.names:
            self.fail(f"not a checkpoint (no {METADATA!r} entry)")
        text = self.archive.text(METADATA, MAX_METADATA_CHARS)
        if text.ndim != 0:
            self.fail(f"entry {METADATA!r} should be one string, it has shape {text.shape}")
        try:
            meta = json.loads(str(text[()]))
        except (ValueError, RecursionError) as error:
            self.fail(f"entry {METADATA!r} is not valid JSON ({type(error).__name__})")
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            self.fail(f'entry {METADATA!r} is not checkpoint metadata (no "format": '
                      f'"{FORMAT}")')
        if meta.get("version") != VERSION:
            self.fail(f"checkpoint format version {meta.get('version')!r}; this version of "
                      f"flexflow reads version {VERSION}")
        return meta

    def counter(self, meta: dict, key: str) -> int:
        value = meta.get(key)
        if type(value) is not int or not 0 <= value < MAX_COUNTER:
            self.fail(f'"{key}" must be a non-negative integer, got {value!r}')
        return value

    def optimizer(self, meta) -> tuple[dict, set[str] | None]:
        """The file's hyper-parameters for the model's optimizer and the slot names its state
        has (None: the model has no optimizer, so slots are not read)."""
        optimizer = self.model.optimizer
        if meta is None:
            return {}, set() if optimizer is not None else None
        if (not isinstance(meta, dict) or not isinstance(meta.get("type"), str)
                or not isinstance(meta.get("hyperparameters"), dict)):
            self.fail('"optimizer" must be null or {"type": ..., "hyperparameters": {...}}')
        if optimizer is None:
            return {}, None
        if meta["type"] != type(optimizer).__name__:
            self.fail(f"saved with {meta['type']}, the model trains with "
                      f"{type(optimizer).__name__}")
        ours, theirs = _hyperparameters(optimizer), meta["hyperparameters"]
        if set(theirs) != set(ours):
            self.fail(f"optimizer hyper-parameters {sorted(theirs)}, {meta['type']} has "
                      f"{sorted(ours)}")
        for name, value in theirs.items():
            expected = bool if isinstance(ours[name], bool) else (int, float)
            if (not isinstance(value, expected) or (expected is not bool and
                                                   (isinstance(value, bool)
                                                    or not _finite(value)))):
                self.fail(f"optimizer hyper-parameter {name!r} is {str(value)[:40]!r}, expected "
                          f"a finite {'bool' if expected is bool else 'number'}")
        try:
            restored = dataclasses.replace(optimizer, **theirs)
        except ValueError as error:  # a value the optimizer refuses (a negative learning rate)
            self.fail(f"optimizer hyper-parameters: {error}")
        slots = restored.rule().init_state(np, np.zeros(1, np.float32))
        return theirs, set(slots)

    def entries(self, meta, slots: set[str] | None) -> dict:
        """(owner layer, index) -> (layer name, WeightSpec, file entry), each entry checked."""
        if not isinstance(meta, list):
            self.fail('"weights" must be a list')
        layers = self.model.graph.layers
        expected = {(layers[ref[0]].name, ref[1]): ref for ref in weight_specs(self.model)}
        specs = weight_specs(self.model)
        found = {}
        for position, entry in enumerate(meta):
            if (not isinstance(entry, dict) or not isinstance(entry.get("layer"), str)
                    or type(entry.get("index")) is not int
                    or not isinstance(entry.get("slots"), list)
                    or not all(isinstance(slot, str) for slot in entry["slots"])):
                self.fail(f'weights entry {position} needs "layer" (a string), "index" (an '
                          f'integer) and "slots" (a list of strings)')
            key = (entry["layer"], entry["index"])
            if key in found:
                self.fail(f"weight {key[1]} of layer '{key[0]}' appears twice")
            found[key] = entry
        unknown = [f"weight {k[1]} of layer '{k[0]}'" for k in found if k not in expected]
        if unknown:
            self.fail(f"holds {', '.join(unknown)}, which the model does not have")
        missing = [f"weight {k[1]} of layer '{k[0]}'" for k in expected if k not in found]
        if missing:
            self.fail(f"has no {', '.join(missing)}")
        checked = {}
        for key, ref in expected.items():
            entry, spec = found[key], specs[ref]
            what = f"weight {key[1]} of layer '{key[0]}'"
            if entry.get("name") != spec.name:
                self.fail(f"{what} is {entry.get('name')!r}, the model's is {spec.name!r}")
            if entry.get("shape") != list(spec.shape):
                self.fail(f"{what} ({spec.name}) has shape {entry.get('shape')!r}, the model's "
                          f"is {list(spec.shape)}")
            if entry.get("dtype") != str(np.dtype(spec.dtype)):
                self.fail(f"{what} ({spec.name}) has dtype {entry.get('dtype')!r}, the model's "
                          f"is {str(np.dtype(spec.dtype))!r}")
            if len(set(entry["slots"])) != len(entry["slots"]):
                self.fail(f"{what} ({spec.name}) lists a slot twice: {entry['slots']!r}")
            if entry["slots"] and slots is not None and set(entry["slots"]) != slots:
                self.fail(f"{what} ({spec.name}) has optimizer slots {entry['slots']!r}, the "
                          f"optimizer keeps {sorted(slots)}")
            checked[ref] = (key[0], spec, entry)
        return checked

    def check_members(self, entries: dict) -> None:
        """The archive holds exactly the metadata and the arrays its entries name."""
        wanted = {METADATA}
        for ref, (layer, _, entry) in entries.items():
            wanted.add(_weight_entry(layer, ref[1]))
            wanted.update(_slot_entry(layer, ref[1], slot) for slot in entry["slots"])
        missing = sorted(wanted - self.archive.names)
        if missing:
            self.fail(f"no entry {missing[0]!r}")
        extra = sorted(self.archive.names - wanted)
        if extra:
            self.fail(f"entry {extra[0]!r} is not described by the metadata")
