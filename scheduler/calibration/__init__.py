"""Calibration: a MachineModel measured on the devices a run will use.

Kernel times per device kind (kernels.py, timed by timing.py), the executor's overheads, links
and effective cores per cluster shape (measure.py, from the probes of probes.py fitted by
fit.py), all cached on disk (cache.py) so that a second run on the same hardware measures
nothing (a cache file of the wrong content, or a folder that cannot be written, is a
`CacheWarning`: measured again, or not kept); the devices are this process or a Dask cluster's
workers (runners.py). How it works: docs/calibration.md.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Sequence

from ..costs import KernelCall
from ..machine import MachineModel
from .cache import CACHE_ENV, CacheWarning, cache_dir, fingerprint
from .kernels import kernel_tables
from .machines import calibrated_machine
from .measure import cluster_measurement
from .probes import Probe, interleaved_ms
from .runners import DaskRunner, LocalRunner
from .timing import time_kernels

__all__ = ["CACHE_ENV", "CacheWarning", "Calibration", "DaskRunner", "LocalRunner", "Probe",
           "cache_dir", "calibrate", "fingerprint", "interleaved_ms", "time_kernels"]


@dataclass
class Calibration:
    machine: MachineModel
    measured: int   # kernel calls timed in this run (0 when everything came from the cache)
    cached: int


def calibrate(runner, calls: Sequence[KernelCall], memory: int | None = None,
              stream=None, refresh_cluster: bool = False) -> Calibration:
    """Measure (or read from the cache) what `calls` cost on each device kind of `runner`, and
    the scheduler and links (measured again when `refresh_cluster`); returns the machine model.
    Prints to `stream` (sys.stdout)."""
    stream = stream or sys.stdout
    tables = kernel_tables(runner, calls, stream)
    cluster, drift = cluster_measurement(runner, tables.keys, refresh_cluster, stream)
    machine = calibrated_machine(runner, tables, cluster, memory, drift)
    kept = max(tables.kept.values(), default=0)
    print(f"Calibration: {machine.describe()}; {tables.shapes} kernel shapes, "
          f"{tables.measured} measured, {tables.cached} from the cache ({cache_dir()})"
          + (f"; kernels keep up to {kept / 2**20:.1f} MiB allocated between calls, taken off "
             f"each device's memory" if kept >= 1 << 20 else ""), file=stream)
    return Calibration(machine, tables.measured, tables.cached)
