"""Strategy files: FlexFlow's text format and a readable JSON form.

Text (FlexFlow r21.03+, whitespace-separated): the number of ops, then per op, sorted by name:
its name, device type (0 = GPU, 1 = CPU), the number of dims, the degrees in *reversed* (Legion)
order each followed by a tab, the number of device ids, and the ids each followed by a tab.

JSON: `{"layers": {"<name>": {"degrees": [...batch-first...], "devices": [...]}}}`, and
`"recompute": true` for a layer whose forward runs again in backward, `"shard_weights": true` for
a layer whose weights stay sharded over their holders between uses, `"in_flight": k` for a
pipeline stage's layer run in 1F1B's schedule (ours: FlexFlow's text format has no place for
these, so saving such a strategy as text warns and leaves them out), and `"contraction": c` for
a split of the features a layer sums over and `"replicas": r` for a layer each of whose boxes r
devices compute (which the text format refuses: they change what runs).

Reading checks the file's form only; `load` also checks it against a model (every layer present,
nothing unknown, each config fits), so a mismatched file is rejected rather than silently
replaced by data parallelism. Every defect, of form or fit, raises `StrategyError` naming the
file and the op; sizes are bounded (`MAX_DIMS` dims, `MAX_DEVICES` partitions and device ids)
before anything is built from them.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from ..ops.graph import Graph
from .strategy import ParallelConfig, StrategyError, validate

MAX_DIMS = 8
MAX_DEVICES = 1 << 16


def dumps_text(strategy: dict[str, ParallelConfig]) -> str:
    split = sorted(name for name, config in strategy.items() if config.copies > 1)
    if split:
        raise StrategyError(f"FlexFlow's text format has no field for a contraction split or "
                            f"replicas (layers {split}): save the strategy as .json")
    lines = [str(len(strategy))]
    for name in sorted(strategy):
        config = strategy[name]
        lines += [name, "0", str(len(config.degrees)),
                  "".join(f"{d}\t" for d in reversed(config.degrees)),
                  str(len(config.devices)), "".join(f"{d}\t" for d in config.devices)]
    return "\n".join(lines) + "\n"


def loads_text(text: str, source: str = "<text>") -> dict[str, ParallelConfig]:
    tokens = text.split()
    position = 0

    def take(what: str) -> str:
        nonlocal position
        if position >= len(tokens):
            raise StrategyError(f"{source}: file ends where {what} was expected")
        position += 1
        return tokens[position - 1]

    def take_int(what: str, low: int, high: int) -> int:
        token = take(what)
        try:
            value = int(token)
        except ValueError:
            raise StrategyError(f"{source}: {what} must be an integer, got {token!r}") from None
        if not low <= value <= high:
            raise StrategyError(f"{source}: {what} {value} is outside {low}..{high}")
        return value

    strategy: dict[str, ParallelConfig] = {}
    for _ in range(take_int("the number of ops", 0, 1 << 20)):
        name = take("an op name")
        if name in strategy:
            raise StrategyError(f"{source}: op {name!r} appears twice")
        take_int(f"the device type of {name}", 0, 1)
        ndims = take_int(f"the number of dims of {name}", 1, MAX_DIMS)
        legion = [take_int(f"a degree of {name}", 1, MAX_DEVICES) for _ in range(ndims)]
        count = take_int(f"the number of device ids of {name}", 0, MAX_DEVICES)
        devices = tuple(take_int(f"a device id of {name}", 0, MAX_DEVICES) for _ in range(count))
        strategy[name] = _config(source, name, tuple(reversed(legion)), devices)
    if position != len(tokens):
        raise StrategyError(f"{source}: unexpected text after the last op: {tokens[position]!r}")
    return strategy


def dumps_json(strategy: dict[str, ParallelConfig]) -> str:
    layers = {name: {"degrees": list(c.degrees), "devices": list(c.devices),
                     **({"recompute": True} if c.recompute else {}),
                     **({"shard_weights": True} if c.shard_weights else {}),
                     **({"contraction": c.contraction} if c.contraction > 1 else {}),
                     **({"in_flight": c.in_flight} if c.in_flight else {}),
                     **({"replicas": c.replicas} if c.replicas > 1 else {})}
              for name, c in sorted(strategy.items())}
    return json.dumps({"layers": layers}, indent=1) + "\n"


def loads_json(text: str, source: str = "<json>") -> dict[str, ParallelConfig]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:  # bad syntax, huge numbers, deep nesting
        raise StrategyError(f"{source}: not valid JSON ({type(error).__name__}: "
                            f"{str(error)[:200]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("layers"), dict):
        raise StrategyError(f'{source}: expected an object with a "layers" object')
    strategy = {}
    for name, entry in data["layers"].items():
        lists = [entry.get(key) if isinstance(entry, dict) else None
                 for key in ("degrees", "devices")]
        if not all(isinstance(v, list) and all(type(d) is int for d in v) for v in lists):
            raise StrategyError(f'{source}: layer {name!r} needs integer lists "degrees" and '
                                f'"devices"')
        degrees, devices = lists
        recompute, shard = (_flag(source, name, entry, key)
                            for key in ("recompute", "shard_weights"))
        contraction = _count(source, name, entry, "contraction", 1)
        in_flight = _count(source, name, entry, "in_flight", 0)
        replicas = _count(source, name, entry, "replicas", 1)
        if not 1 <= len(degrees) <= MAX_DIMS or any(d < 1 for d in degrees) or any(
                not 0 <= d <= MAX_DEVICES for d in devices):
            raise StrategyError(f"{source}: layer {name!r} has invalid degrees or devices (1 to "
                                f"{MAX_DIMS} degrees >= 1, device ids 0..{MAX_DEVICES})")
        strategy[name] = _config(source, name, tuple(degrees), tuple(devices), recompute,
                                 shard, contraction, in_flight, replicas)
    return strategy


def _count(source: str, name: str, entry: dict, key: str, default: int) -> int:
    """A layer's optional integer entry `key`, from `default` to MAX_DEVICES."""
    value = entry.get(key, default)
    if type(value) is not int or not default <= value <= MAX_DEVICES:
        raise StrategyError(f'{source}: layer {name!r} has "{key}" {value!r}: it must be an '
                            f'integer from {default} to {MAX_DEVICES}')
    return value


def _flag(source: str, name: str, entry: dict, key: str) -> bool:
    """A layer's optional true/false entry `key` (false where absent)."""
    value = entry.get(key, False)
    if type(value) is not bool:
        raise StrategyError(f'{source}: layer {name!r} has "{key}" {value!r}: it must be true '
                            f'or false')
    return value


def _config(source: str, name: str, degrees: tuple[int, ...], devices: tuple[int, ...],
            recompute: bool = False, shard_weights: bool = False, contraction: int = 1,
            in_flight: int = 0, replicas: int = 1):
    """The config of layer `name`; no device ids means partition p on device p."""
    parts = contraction * replicas
    for d in degrees:
        parts *= d
    if parts > MAX_DEVICES:
        raise StrategyError(f"{source}: op {name!r} has {parts} partitions, more than "
                            f"{MAX_DEVICES}")
    if not devices:
        devices = tuple(range(parts))
    elif len(devices) != parts:
        raise StrategyError(f"{source}: op {name!r} has {parts} partitions but {len(devices)} "
                            f"device ids")
    return ParallelConfig(degrees, devices, recompute, shard_weights, contraction, in_flight,
                          replicas)


def save(strategy: dict[str, ParallelConfig], path: str) -> None:
    """JSON when the file name ends in .json, FlexFlow's text format otherwise (which warns
    where the strategy recomputes layers, shards their weights or runs 1F1B's schedule: the
    format cannot say so)."""
    if is_json(path):
        Path(path).write_text(dumps_json(strategy))
        return
    for what, field in (("recomputation", "recompute"), ("weight sharding", "shard_weights"),
                        ("1F1B schedule", "in_flight")):
        named = sorted(name for name, config in strategy.items() if getattr(config, field))
        if named:
            warnings.warn(f"{path}: FlexFlow's text format has no {what}; the layers "
                          f"{', '.join(named)} are written without it (a .json file keeps "
                          f"it)", stacklevel=2)
    Path(path).write_text(dumps_text(strategy))


def is_json(path: str) -> bool:
    """Whether `save` writes `path` as JSON, which holds every configuration (the text format
    refuses contraction splits and replicas)."""
    return str(path).endswith(".json")


def read(path: str) -> dict[str, ParallelConfig]:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise StrategyError(f"cannot read strategy file {path}: {error}") from None
    return loads_json(text, path) if text.lstrip().startswith("{") else loads_text(text, path)


def load(path: str, graph: Graph, num_devices: int) -> dict[str, ParallelConfig]:
    """Read a strategy file and check that it fits this model and device count."""
    strategy = read(path)
    try:
        validate(graph, strategy, num_devices)
    except StrategyError as error:
        raise StrategyError(f"strategy file {path} does not match the model: {error}") from None
    return strategy
