"""Kernel tables: what each device kind's kernels cost now, from its cache file, completed by
timing the kernels it lacks, and scaled by the reference kernel timed now."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Sequence

from ..costs import KernelCall
from ..machine import GB, MAX_MS, MIN_RATE
from .cache import (CACHE_FORMAT, MIN_TIMED_MS, Check, cache_dir, digest, exactly, fingerprint,
                    kind_names, load, number, record, store, table)
from .timing import device_speed, reference_ms, time_kernels

TIMING_ROUNDS = 5  # timings of the reference kernel that scale the cached kernel times now
BATCH = 4  # kernels timed per call on a device
MAX_BYTES = 1 << 62  # a partial result's bytes: beyond any device's memory


@dataclass
class KernelTables:
    """Each device's kind name and fingerprint key, and per kind name its (GFLOP/s, GB/s) and
    kernel times now (ms by kernel key); partial results' bytes by kernel key."""

    names: list[str]
    keys: list[str]
    kinds: dict = field(default_factory=dict)
    costs: dict = field(default_factory=dict)
    partials: dict = field(default_factory=dict)
    kept: dict = field(default_factory=dict)  # per kind name: the most bytes a kernel keeps
    shapes: int = 0    # distinct kernel calls asked for
    measured: int = 0  # kernel calls timed in this run (0 when everything came from the cache)
    cached: int = 0


def unique_calls(calls: Sequence[KernelCall]) -> list[KernelCall]:
    """The first call of each kernel key."""
    seen: dict[str, KernelCall] = {}
    for call in calls:
        seen.setdefault(call.key, call)
    return list(seen.values())


def kernel_tables(runner, calls: Sequence[KernelCall], stream) -> KernelTables:
    """The kernel tables of every device kind of `runner` for `calls`; each kind's cache file
    gets the kernels timed now."""
    infos = [runner.run(d, fingerprint, runner.cpu_only) for d in range(runner.num_devices)]
    keys = [digest({**info, "cache format": CACHE_FORMAT}) for info in infos]
    unique = unique_calls(calls)
    tables = KernelTables(kind_names(infos, keys), keys, shapes=len(unique))
    for key in dict.fromkeys(keys):
        device = keys.index(key)
        _add_kind(tables, runner, device, infos[device], unique, stream)
    return tables


def _add_kind(tables: KernelTables, runner, device: int, info: dict,
              unique: list[KernelCall], stream) -> None:
    """Read, complete and store the cache file of `device`'s kind; add it to `tables`."""
    key, name = tables.keys[device], tables.names[device]
    path = cache_dir() / f"kind-{key}.json"
    data = (load(path, kind_file(info))
            or {"fingerprint": info, "kernels": {}, "partial_bytes": {}, "kept_bytes": {}})
    now = statistics.median(runner.run(device, reference_ms, runner.cpu_only)
                            for _ in range(TIMING_ROUNDS))  # it scales every kernel
    if "peak_gflops" not in data:
        flops, copy = runner.run(device, device_speed, runner.cpu_only)
        data["peak_gflops"], data["memory_bandwidth_gbs"] = flops / 1e6, copy / GB
        data["speed_reference_ms"] = now
    missing = [c for c in unique if c.key not in data["kernels"]]
    tables.cached += len(unique) - len(missing)
    if missing:
        _time_missing(runner, device, name, missing, data, stream)
        tables.measured += len(missing)
    store(path, data)
    tables.costs[name] = {k: v * now for k, v in data["kernels"].items()}
    tables.partials.update(data["partial_bytes"])
    tables.kept[name] = max((data["kept_bytes"].get(c.key, 0) for c in unique), default=0)
    slower = now / data["speed_reference_ms"]
    tables.kinds[name] = (data["peak_gflops"] / slower, data["memory_bandwidth_gbs"] / slower)


def kind_file(info: dict) -> Check:
    """What the cache file of the device kind of fingerprint `info` holds: that fingerprint,
    kernel times as multiples of the reference kernel's (a kernel takes some time), partial
    results' bytes, the bytes kernels keep allocated between calls (where any), and the
    device's speed with the reference kernel's time when it was measured (which times now are
    divided by)."""
    return record({"fingerprint": exactly(info),
                   "kernels": table(number(0.0, MAX_MS, above=True)),
                   "partial_bytes": table(number(0, MAX_BYTES, whole=True)),
                   "kept_bytes": table(number(0, MAX_BYTES, whole=True)),
                   "peak_gflops": number(MIN_RATE / 1e6),
                   "memory_bandwidth_gbs": number(MIN_RATE / GB),
                   "speed_reference_ms": number(MIN_TIMED_MS, MAX_MS)})


def _time_missing(runner, device: int, name: str, missing: list[KernelCall], data: dict,
                  stream) -> None:
    """Time `missing` on `device` in batches into `data`, showing progress on `stream`: a
    bar on a terminal, else a line every quarter."""
    tty = getattr(stream, "isatty", lambda: False)()
    started, done = time.perf_counter(), 0
    shown = -1
    for i in range(0, len(missing), BATCH):
        chunk = missing[i:i + BATCH]
        for call, (ms, nbytes, kept) in zip(chunk, runner.run(device, time_kernels, chunk,
                                                                runner.cpu_only)):
            data["kernels"][call.key] = ms
            if nbytes:
                data["partial_bytes"][call.key] = nbytes
            if kept:
                data["kept_bytes"][call.key] = kept
        done += len(chunk)
        percent = 100 * done // len(missing)
        if tty or percent // 25 > shown or done == len(missing):
            shown = percent // 25
            end = "\r" if tty and done < len(missing) else "\n"
            print(f"Calibrating kernels on device {device} ({name}): {done}/{len(missing)} "
                  f"({time.perf_counter() - started:.1f} s)", end=end, file=stream, flush=True)
