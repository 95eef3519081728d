"""The calibration cache: where it lives, the fingerprint that keys a device kind, JSON files.

One file per device kind (kernel times) and one per cluster shape (overheads, links, cores),
each named by a digest of what decides its contents, so a second run on the same hardware
measures nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from ...ops import vendor
from .. import allocator
from ..cluster import array_module

CACHE_ENV = "FLEXFLOW_DASK_CACHE"
CACHE_FORMAT = 5  # kernel times as multiples of the reference kernel timed next to each run
CLUSTER_FORMAT = 13  # cluster files: overheads fitted to the simulator's model of the executor


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "flexflow-dask")


def digest(data: Any) -> str:
    """A short stable name for JSON-able `data` (a cache file's key)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def load(path: Path) -> dict:
    """The cache file's contents, or {} when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def store(path: Path, data: dict) -> None:
    """Write `data` whole or not at all: other processes may read the file meanwhile."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(data, indent=1, sort_keys=True))
    partial.replace(path)


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
