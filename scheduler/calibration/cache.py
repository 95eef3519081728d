"""The calibration cache: where it lives, the fingerprint that keys a device kind, JSON files.

One file per device kind (kernel times) and one per cluster shape (overheads, links, cores),
each named by a digest of what decides its contents, so a second run on the same hardware
measures nothing.

A cache is only a cache: every file read is checked whole against the structure its reader
declares (`record`, `table`, `number`, `exactly`: exact keys, types, finite numbers within
bounds), and a file that cannot be read, is not JSON or fails the check is ignored with a
`CacheWarning` naming it and what was wrong; the reader measures again and overwrites it. A
folder that cannot be written gets one `CacheWarning` naming it and the error, and the run goes
on with what it measured.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import warnings
from contextlib import suppress
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from ...ops import vendor
from .. import allocator
from ..cluster import array_module

CACHE_ENV = "FLEXFLOW_DASK_CACHE"
CACHE_FORMAT = 7  # kernel times as multiples of the reference kernel timed next to each run,
# both warm, and the bytes kernels keep allocated between calls
CLUSTER_FORMAT = 15  # cluster files: overheads fitted to the simulator's model of the executor
MIN_TIMED_MS = 1e-6  # a nanosecond: no run calibration times (and divides by) is shorter


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "flexflow-dask")


def digest(data: Any) -> str:
    """A short stable name for JSON-able `data` (a cache file's key)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


Check = Callable[[Any, str], None]  # raises Invalid naming `where` (its 2nd argument) and why


class CacheWarning(UserWarning):
    """A calibration cache file was ignored (unreadable or invalid: measured again and
    overwritten), or the cache folder cannot be written (the run goes on without storing)."""


class Invalid(ValueError):
    """What is wrong with a cache file's contents; becomes a CacheWarning."""


def load(path: Path, check: Check) -> dict:
    """The cache file's contents, checked whole by `check`; {} (measure again) when the file
    is missing, and also, with a CacheWarning naming the file and the problem, when it cannot
    be read, is not JSON or fails the check."""
    try:
        data = json.loads(path.read_bytes())
        check(data, "top level")
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except (OSError, ValueError, RecursionError) as error:  # Invalid and JSON errors: ValueError
        problem = error if isinstance(error, Invalid) else f"{type(error).__name__}: {error}"
        warnings.warn(CacheWarning(f"calibration cache file {path} ignored ({problem}); "
                                   f"measuring again and overwriting it"), stacklevel=2)
        return {}
    return data


_unwritable: set[Path] = set()  # cache folders already warned about in this process


def store(path: Path, data: dict) -> None:
    """Write `data` whole or not at all: other processes may read the file meanwhile. A
    folder that cannot be written (read-only, under a file, full) is warned about once per
    process, and the run goes on with the values it measured."""
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(data, indent=1, sort_keys=True))
        partial.replace(path)
    except OSError as error:
        _warn_unwritable(path.parent, error)
    finally:  # whatever stopped the write (an interrupt too) leaves no partial file behind
        with suppress(OSError):
            partial.unlink(missing_ok=True)


def _warn_unwritable(folder: Path, error: OSError) -> None:
    if folder not in _unwritable:
        _unwritable.add(folder)
        warnings.warn(CacheWarning(
            f"calibration cache folder {folder} cannot be written ({error}); going on with the "
            f"values measured now, which the next run measures again (set {CACHE_ENV} to a "
            f"writable folder to keep them)"), stacklevel=3)


# ---- the checks readers declare their files' structure with -------------------------------------
def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _at(where: str, key: str) -> str:
    return key if where == "top level" else f"{where}.{key}"


def _an_object(value: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise Invalid(f"{where} is {_shown(value)}, expected an object")


def record(fields: dict[str, Check]) -> Check:
    """A check of an object with exactly the keys of `fields`, each value checked by its own."""
    def check(value: Any, where: str) -> None:
        _an_object(value, where)
        missing, extra = sorted(set(fields) - set(value)), sorted(set(value) - set(fields))
        if missing or extra:
            raise Invalid(f"{where} has keys {sorted(value)[:8]}, expected {sorted(fields)}")
        for key, field in fields.items():
            field(value[key], _at(where, key))
    return check


def optional(check: Check) -> Check:
    """A check of null, or of what `check` checks."""
    def checked(value: Any, where: str) -> None:
        if value is not None:
            check(value, where)
    return checked


def table(item: Check) -> Check:
    """A check of an object of any keys whose values `item` checks (a table by kernel key)."""
    def check(value: Any, where: str) -> None:
        _an_object(value, where)
        for key, entry in value.items():
            item(entry, f"{where}[{key!r}]")
    return check


def number(low: float, high: float = sys.float_info.max, *, above: bool = False,
           whole: bool = False, null: bool = False) -> Check:
    """A check of a number (not a bool) from `low` (or above it, if `above`) to `high`, which
    NaN and the infinities fail; a whole one if `whole`; or null if `null`."""
    upto = f"to {high:g}" if high < sys.float_info.max else "up (finite)"
    wanted = (f"{'a whole number' if whole else 'a number'} "
              f"{'above' if above else 'from'} {low:g} {upto}{' or null' if null else ''}")

    def check(value: Any, where: str) -> None:
        if value is None and null:
            return
        if (isinstance(value, bool) or not isinstance(value, int if whole else (int, float))
                or not (value > low if above else value >= low) or not value <= high):
            raise Invalid(f"{where} is {_shown(value)}, expected {wanted}")
    return check


def exactly(expected: Any) -> Check:
    """A check that a value is `expected` (what the file's name is the digest of)."""
    def check(value: Any, where: str) -> None:
        if value != expected:
            raise Invalid(f"{where} is {_shown(value)}, expected {_shown(expected)}")
    return check


def fingerprint(cpu_only: bool = False) -> dict:
    """What decides how fast kernels run here (runs on a worker, or in this process)."""
    xp = array_module(cpu_only)
    info = {"python": platform.python_version(), "machine": platform.machine(),
            "array_module": xp.__name__, "array_version": xp.__version__,
            "cores": os.cpu_count(), "cpu": _cpu_model(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")
            or os.environ.get("OMP_NUM_THREADS"),
            "flexflow_dask": metadata.version("flexflow-dask"), "allocator": allocator.policy(),
            "kernels": vendor.kernel_path()}
    if info["kernels"] == "vendor":
        info["torch"] = metadata.version("torch")
    if xp.__name__ == "cupy":
        info["gpu"] = xp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def kind_name(info: dict) -> str:
    """A device kind's readable name, from its fingerprint."""
    if "gpu" in info:
        return info["gpu"]
    return f"{info['cpu']} ({info['blas_threads'] or 'all'} BLAS thread(s))"


def kind_names(infos: list[dict], keys: list[str]) -> list[str]:
    """Each device's kind name: fingerprints that differ but read alike get the key's start
    appended, so that every name stands for one fingerprint."""
    names = [kind_name(info) for info in infos]
    first_key: dict[str, str] = {}
    for i, (name, key) in enumerate(zip(names, keys)):
        if first_key.setdefault(name, key) != key:
            names[i] = f"{name} #{key[:6]}"
    return names
