"""Calibration: a MachineModel measured on the devices a run will use.

* Kernels: every distinct kernel call the search may score (operator + partition shapes + phase,
  `costs.KernelCall`) is timed on one device of each device kind: warm-up, then repeats, median.
  Times are stored as multiples of a reference kernel timed in the same batch, and turned back
  into milliseconds with the reference timed now, so a cached table follows the speed a shared
  machine has today.
* Device kinds: a worker's kind is its hardware and software fingerprint (CPU model and cores or
  GPU name, array module, NumPy/CuPy, Python and flexflow-dask versions, BLAS threads, the
  kernels it runs and torch's version when they are the vendor ones (ops/vendor.py), whether
  the allocator keeps freed memory, as our workers' does: scheduler/allocator.py); workers
  with one fingerprint share measurements.
* Cores: a run of reference kernels on one device, and on all at once (started at one
  wall-clock time, timed from that start to the last device's end), gives how many devices
  really compute at the same time (worker processes standing in for devices share the host's
  cores). It is measured with the executor's overheads and kept with them: they are fitted
  with it (a probe's time is its overheads shared among the cores), and one measurement on a
  shared host is off by up to a third, so a later one would spoil what the fit settled. The
  executor's overheads are rescaled at every calibration by a short chain of probe groups
  timed then and when they were measured (the pace of the workers' event loops on a shared
  host).
* Executor and links: probe task graphs run through the real executor, round-robin so that load
  swings hit them alike: chains of dependent fused groups across two devices (per-level cost),
  rings that keep every device busy at every level, rings where each group receives from every
  other device, gathers to one device and spreads back (a data-parallel update's shape); the
  executor's overheads (per fused group, per hop, per received input, per iteration, the link
  latency, the scheduler's time per device's program) are those with which the simulator itself
  reproduces these times best. A fused group of many real actions with kernels of one element
  (ReLU forwards) gives the per-action overhead, transfers of 4 and 32 MB the bandwidth (shared
  by the transfers out of, or into, one worker), raw Dask task chains on one and on two workers
  the starting link latency, and submitting arrays the client's bandwidth to a worker. A tiny
  real model's data-parallel iteration is timed among the probes (`model_probe.py`): what the
  fitted overheads leave out of it is added to the per-iteration overhead.

Everything is cached on disk (`$FLEXFLOW_DASK_CACHE`, default `~/.cache/flexflow-dask`): one
file per device kind (kernel times) and one per cluster shape (overheads, links, cores), keyed by
the fingerprints, so a second run of the same model on the same hardware measures nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import platform
import statistics
import sys
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

from ..ops import vendor
from ..ops.base import Part
from ..ops.box import Box
from ..ops.elementwise import ElementUnary
from ..ops.finite import all_finite
from ..ops.graph import Graph
from ..ops.spec import TensorSpec
from . import actions as A
from . import allocator
from .cluster import array_module, watched_gather, watched_wait, workers_now
from .costs import KernelCall
from .executor import LocalExecutor, fuse, run_group
from .machine import GB, DeviceKind, Hop, MachineModel, Overheads
from .model_probe import ModelProbe
from .taskgraph import Task, TaskGraph

CACHE_ENV = "FLEXFLOW_DASK_CACHE"
CACHE_FORMAT = 5  # kernel times as multiples of the reference kernel timed next to each run
CLUSTER_FORMAT = 13  # cluster files: overheads fitted to the simulator's model of the executor
# (10: devices push what they send each other; 11: probes send several arrays; 12: and a real
# model's iteration, model_probe.py; 13: an iteration's programs submitted as one graph, and
# effective cores from paired timings)
WARMUP, REPEATS, BUDGET_MS = 1, 5, 400.0  # per kernel: repeats stop early past the budget
PROBE_BYTES = 4 << 20
LINK_BYTES = 32 << 20  # with PROBE_BYTES: two transfer sizes, whose difference gives bandwidth
PAYLOAD_BYTES = 16 << 10  # what each scheduler probe task sends on, as every real fused task does
PAYLOAD_ITEMS = 8  # ... in as many arrays (a layer's activations, or the gradients of its weights)
REFERENCE_BYTES = 32 << 20  # the reference kernel's copy: memory-bound, as large kernels are
CHAIN = (1, 2, 4, 6, 9)  # lengths of the dependent-hop probes (long ones: real iterations are)
RAW_CHAIN = (1, 2, 4, 8)  # lengths of the raw Dask chains that give the fetch latency
STAR = (1, 2, 3)  # rounds of the gather-then-spread probes
FIT_STEPS, FIT_DELTA, FIT_DAMPING = 80, 0.25, 1e-2  # Levenberg-Marquardt steps, finite-
# difference step (ms), starting damping
PROBE_RUNS = 15  # rounds of the scheduler and link probes (a shared host is noisy)
PACE_CHAIN, PACE_RUNS = 4, 9  # the chain (one of CHAIN) and its runs timed at every calibration
WIDE = 200  # actions in the probe of per-action overhead
TOGETHER_LEAD_S = 0.3  # how far ahead devices timing the reference kernel together are started
REFERENCE_RUNS, TIMING_ROUNDS = 8, 5  # reference kernels per timed run; timings of the
# reference kernel that scale the cached kernel times now
CORES_ROUNDS = 11  # pairs of an alone and a together run that give the effective cores
LOCAL_BANDWIDTH = 1e12   # bytes per ms: in-process "transfers" pass references


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "flexflow-dask")


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _store(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(data, indent=1, sort_keys=True))
    partial.replace(path)


# ---- runs on a worker (or in this process) -------------------------------------------------------
def fingerprint(cpu_only: bool = False) -> dict:
    """What decides how fast kernels run here."""
    xp = array_module(cpu_only)
    from importlib import metadata
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
    if "gpu" in info:
        return info["gpu"]
    return f"{info['cpu']} ({info['blas_threads'] or 'all'} BLAS thread(s))"


def _synchronizer(xp) -> Callable[[], None]:
    if xp.__name__ == "cupy":
        return xp.cuda.get_current_stream().synchronize
    return lambda: None


def _timed_ms(fn: Callable[[], Any], sync: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    sync()
    return (time.perf_counter() - start) * 1e3


def _warmed_up(fn: Callable[[], Any], sync: Callable[[], None]) -> Any:
    """`fn`'s result after its `WARMUP` untimed runs."""
    result = None
    for _ in range(WARMUP):
        result = fn()
        sync()
    return result


def _median_ms(fn: Callable[[], Any], sync: Callable[[], None]) -> tuple[float, Any]:
    result = _warmed_up(fn, sync)
    samples: list[float] = []
    while len(samples) < REPEATS and (not samples or sum(samples) < BUDGET_MS):
        samples.append(_timed_ms(fn, sync))
    return statistics.median(samples), result


def _median_ratio(fn: Callable[[], Any], reference: Callable[[], None],
                  sync: Callable[[], None]) -> tuple[float, Any]:
    """(median over runs of `fn`'s time over the time of the `reference` run just before it,
    `fn`'s result). `fn` runs once more, untimed, between the two: it is timed with its
    operands in the caches, as when run back to back, not after the reference flushed them."""
    result = _warmed_up(fn, sync)
    ratios: list[float] = []
    spent = 0.0
    while len(ratios) < REPEATS and spent < BUDGET_MS:
        reference_time = _timed_ms(reference, sync)
        fn()
        sync()
        ms = _timed_ms(fn, sync)
        ratios.append(ms / reference_time)
        spent += ms
    return statistics.median(ratios), result


def _nbytes(value) -> int:
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


def _array(xp, rng, shape, dtype):
    if dtype.startswith("float"):
        return xp.asarray(rng.standard_normal(shape).astype(dtype))
    return xp.zeros(shape, dtype)  # indices: zeros are valid for every embedding and label


def _kernel(xp, rng, call: KernelCall) -> Callable[[], Any]:
    """A closure running `call` once on freshly made inputs (made here, not timed)."""
    if call.phase == "loss":
        out_shape, label_shape, label_dtype = call.probe
        out = xp.asarray(rng.uniform(0.01, 1.0, out_shape).astype("float32"))
        label = _array(xp, rng, label_shape, label_dtype)
        return lambda: call.subject(xp, out, label)
    if call.phase == "update":
        (shape,) = call.probe
        weight, grad = _array(xp, rng, shape, "float32"), _array(xp, rng, shape, "float32")
        state = call.subject.init_state(xp, weight)
        return lambda: call.subject.update(xp, weight, grad, state, 0)
    if call.phase == "check":
        (shape,) = call.probe
        grad = _array(xp, rng, shape, "float32")
        return lambda: all_finite(xp, grad)
    if call.phase == "sum":
        (shape,) = call.probe
        grad, extra = _array(xp, rng, shape, "float32"), _array(xp, rng, shape, "float32")
        return lambda: grad + extra
    op = call.subject
    out_boxes, in_boxes, in_shapes, in_dtypes, weight_shapes, group, grads = call.probe
    xs = [_array(xp, rng, b.shape, d) for b, d in zip(in_boxes, in_dtypes)]
    ws = [_array(xp, rng, s, "float32") for s in weight_shapes]
    part = Part(out_boxes, in_boxes, in_shapes, True, 0, None, grads)
    if call.phase == "forward_partial":
        return lambda: op.forward_partial(xp, xs, ws, part)
    if group:
        part = replace(part, reduced=op.combine(
            xp, [op.forward_partial(xp, xs, ws, part)] * group, "forward"))
    if call.phase == "forward":
        return lambda: op.forward(xp, xs, ws, part)
    ys, saved = op.forward(xp, xs, ws, part)
    dys = [_array(xp, rng, y.shape, "float32") for y in ys]
    if call.phase == "backward_partial":
        return lambda: op.backward_partial(xp, dys, saved, part)
    if group:
        part = replace(part, reduced=op.combine(
            xp, [op.backward_partial(xp, dys, saved, part)] * group, "backward"))
    return lambda: op.backward(xp, dys, saved, part)


def time_kernels(calls: Sequence[KernelCall], cpu_only: bool = False) -> list[tuple[float, int]]:
    """(time as a multiple of the reference kernel's, bytes of the result) of each call, on
    this process's device.

    Each timing of a kernel is paired with a timing of the reference just before it. A shared
    host's speed swings by a third from one second to the next, and every kernel timed in
    that second swings with it: scaled by one reference timed around a batch of kernels, whole
    batches of the table came out that far off, and a convolution split by height was costed
    at half its data-parallel twin, which runs as fast; the search picked the split."""
    import numpy
    xp = array_module(cpu_only)
    sync = _synchronizer(xp)
    rng = numpy.random.default_rng(0)
    reference = _reference_mix(xp)
    out = []
    for call in calls:
        ratio, result = _median_ratio(_kernel(xp, rng, call), reference, sync)
        out.append((ratio, _nbytes(result) if call.phase.endswith("partial") else 0))
    return out


def _reference_mix(xp) -> Callable[[], None]:
    """The reference kernel: a fixed mix of a matmul and a large copy, arrays made here."""
    import numpy
    rng = numpy.random.default_rng(0)
    a, b = _array(xp, rng, (512, 512), "float32"), _array(xp, rng, (512, 512), "float32")
    src = xp.ones(REFERENCE_BYTES // 4, "float32")  # beyond the caches; quick to make
    dst = xp.empty_like(src)

    def mix():
        a @ b
        xp.copyto(dst, src)
    return mix


def reference_ms(cpu_only: bool = False) -> float:
    """The reference kernel's median time: kernel times are stored as multiples of it, so a
    cached table follows the speed the device has now (a shared machine's load changes)."""
    xp = array_module(cpu_only)
    sync = _synchronizer(xp)
    return _median_ms(_reference_mix(xp), sync)[0]


def reference_span_at(start: float, cpu_only: bool = False) -> tuple[float, float]:
    """(began, ended), wall-clock seconds: `REFERENCE_RUNS` reference kernels in a row, begun
    at the wall-clock time `start` (after making the arrays and one warm-up run; waiting a
    second at most). Devices timing it together must really run it at once: their Dask tasks
    start milliseconds apart, and those started first would otherwise run alone for a while."""
    xp = array_module(cpu_only)
    sync = _synchronizer(xp)
    mix = _reference_mix(xp)
    mix()
    sync()
    time.sleep(min(1.0, max(0.0, start - time.time())))
    began = time.time()
    for _ in range(REFERENCE_RUNS):
        mix()
    sync()
    return began, time.time()


def device_speed(cpu_only: bool = False) -> tuple[float, float]:
    """(FLOP per ms of a float32 matmul, bytes per ms of a large copy) for analytic costs."""
    import numpy
    xp = array_module(cpu_only)
    sync = _synchronizer(xp)
    rng = numpy.random.default_rng(0)
    a, b = _array(xp, rng, (512, 512), "float32"), _array(xp, rng, (512, 512), "float32")
    matmul_ms, _ = _median_ms(lambda: a @ b, sync)
    src = _array(xp, rng, (PROBE_BYTES // 4,), "float32")
    dst = xp.empty_like(src)
    copy_ms, _ = _median_ms(lambda: xp.copyto(dst, src), sync)
    return 2 * 512 ** 3 / matmul_ms, src.nbytes / copy_ms


def group_overhead_ms(group) -> float:
    """Deserialising and running a fused task of no-op actions: the worker's share of a task."""
    from .actions import Context
    blob = pickle.dumps(group)
    ctx = Context(None)
    start = time.perf_counter()
    for _ in range(20):
        run_group(ctx, None, pickle.loads(blob))
    return (time.perf_counter() - start) * 1e3 / 20


@dataclass(frozen=True)
class Probe(A.Action):
    """A calibration action: emits `nbytes` for device `dst`, and metric sums if asked."""

    nbytes: int = 0
    dst: int = -1
    metrics: bool = False

    def run(self, store, ctx, out):
        if self.nbytes:
            import numpy
            size = self.nbytes // PAYLOAD_ITEMS
            out.setdefault(self.dst, []).extend(
                ("partial", ("probe", i), numpy.zeros(size, "uint8"))
                for i in range(PAYLOAD_ITEMS))
        if self.metrics:
            out.setdefault("metrics", []).append({})


def _noop(*args) -> None:
    return None


# ---- where kernels and probes run --------------------------------------------------------------
class LocalRunner:
    """Devices are this process (the in-process executor)."""

    def __init__(self, num_devices: int, cpu_only: bool = False):
        self.num_devices = num_devices
        self.cpu_only = cpu_only

    def run(self, device: int, fn, *args):
        return fn(*args)

    def executor(self, taskgraph: TaskGraph, ctx: A.Context | None = None):
        return LocalExecutor(taskgraph, ctx or A.Context(None), self.num_devices,
                             array_module(self.cpu_only))

    def hosts(self) -> list[str]:
        return ["local"] * self.num_devices

    def run_all(self, fn, *args) -> list:
        """`fn(*args)` on every device at once; here they run one after the other, as the
        in-process executor runs devices."""
        return [fn(*args) for _ in range(self.num_devices)]

    def memory(self) -> list[int | None]:
        return [None] * self.num_devices

    def raw_chain_ms(self, devices: Sequence[int], length: int) -> float:
        return 0.0

    def submit_ms(self, device: int, nbytes: int) -> float:
        return 0.0


class DaskRunner:
    """Device d is the worker `workers[d]` of a Dask cluster."""

    def __init__(self, client, workers: list[str], cpu_only: bool = False,
                 memory: list[int | None] | None = None):
        self.client = client
        self.workers = workers
        self.num_devices = len(workers)
        self.cpu_only = cpu_only
        self._memory = memory  # read with the worker list (cluster.Cluster.memory)
        client.run(allocator.keep_freed_memory, workers=workers)  # as the executor's workers

    def run(self, device: int, fn, *args):
        worker = [self.workers[device]]
        future = self.client.submit(fn, *args, workers=worker, allow_other_workers=False,
                                    pure=False)
        watched_wait(self.client, [future], worker, "calibration")
        return watched_gather(self.client, [future], worker, "calibration")[0]

    def executor(self, taskgraph: TaskGraph, ctx: A.Context | None = None):
        from .distributed import DaskExecutor
        return DaskExecutor(taskgraph, ctx or A.Context(None), self.client, self.workers,
                            self.cpu_only)

    def hosts(self) -> list[str]:
        return [w.rsplit("://", 1)[-1].rsplit(":", 1)[0] for w in self.workers]

    def run_all(self, fn, *args) -> list:
        """`fn(*args)` on every device at once."""
        futures = [self.client.submit(fn, *args, workers=[w], allow_other_workers=False,
                                      pure=False) for w in self.workers]
        watched_wait(self.client, futures, self.workers, "calibration")
        return watched_gather(self.client, futures, self.workers, "calibration")

    def memory(self) -> list[int | None]:
        if self._memory is None:
            info = workers_now(self.client)
            self._memory = [info[w].get("memory_limit") or None if w in info else None
                            for w in self.workers]
        return self._memory

    def raw_chain_ms(self, devices: Sequence[int], length: int) -> float:
        """A chain of `length` dependent tiny tasks visiting `devices` in turn."""
        start = time.perf_counter()
        future = None
        for i in range(length):
            worker = self.workers[devices[i % len(devices)]]
            future = self.client.submit(_noop, future, i, workers=[worker],
                                        allow_other_workers=False, pure=False)
        watched_wait(self.client, [future], self.workers, "calibration")
        return (time.perf_counter() - start) * 1e3

    def submit_ms(self, device: int, nbytes: int) -> float:
        import numpy
        payload = numpy.zeros(nbytes, "uint8")
        start = time.perf_counter()
        future = self.client.submit(_noop, payload, workers=[self.workers[device]],
                                    allow_other_workers=False, pure=False)
        watched_wait(self.client, [future], self.workers, "calibration")
        return (time.perf_counter() - start) * 1e3


# ---- scheduler and link probes -----------------------------------------------------------------
def _sending(device: int, dst: int, metrics: bool = False, nbytes: int = 0) -> Probe:
    """A probe task's first action: a small array (and `nbytes` more) for `dst`, as real fused
    tasks send activations on; the metric sums if asked."""
    return Probe(PAYLOAD_BYTES + nbytes if dst != device else 0, dst, metrics)


def _probe_graph(devices: Sequence[int], length: int, actions: int = 1, nbytes: int = 0,
                 metrics: bool = True) -> TaskGraph:
    """A chain of `length` fused tasks visiting `devices` in turn, each of `actions` actions:
    the first sends a small array on, the rest do nothing; the first task may also send
    `nbytes` more, and metric sums."""
    tasks, previous = [], ()
    for i in range(length):
        device = devices[i % len(devices)]
        keys = []
        for k in range(actions):
            action, phase = A.Receive(), "forward"
            if k == 0:
                first = i == 0 and metrics
                action = _sending(device, devices[(i + 1) % len(devices)], first,
                                  nbytes if i == 0 else 0)
                phase = "loss" if first else "forward"
            key = f"probe{i}-forward-{k}"
            tasks.append(Task(key, device, phase, action, previous))
            keys.append(key)
        previous = tuple(keys)
    return TaskGraph(tasks)


def _action_graph(length: int) -> tuple[Graph, TaskGraph]:
    """One fused group on device 0: a constant of one element, then the forward of a chain of
    `length` ReLUs of it. Their kernels take next to nothing; what a real action costs beyond
    its kernel (reading its inputs from the store, describing its partition, storing its
    outputs) remains."""
    graph = Graph()
    tensor = graph.add_constant(TensorSpec((1,)), 1.0).id
    box = Box.full((1,))
    tasks = [Task("constant-forward", 0, "forward", A.Fill(tensor, box, 1.0))]
    for i in range(length):
        tensor = graph.add_layer(ElementUnary("relu"), [tensor]).outputs[0]
        tasks.append(Task(f"relu{i}-forward", 0, "forward", A.Forward(i, 0, (box,), (box,), ()),
                          (tasks[-1].key,)))
    return graph, TaskGraph(tasks)


def interleaved_ms(probes: dict, rounds: int) -> dict:
    """Median ms of each probe (a callable), run round-robin `rounds` times after a warm-up
    each, so that a slow spell of a shared machine falls on all of them alike."""
    for probe in probes.values():
        probe()
    samples: dict = {name: [] for name in probes}
    for _ in range(rounds):
        for name, probe in probes.items():
            start = time.perf_counter()
            probe()
            samples[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(values) for name, values in samples.items()}


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Theil-Sen line (median of pairwise slopes, median intercept): robust to outliers."""
    slope = statistics.median((ys[j] - ys[i]) / (xs[j] - xs[i])
                              for i in range(len(xs)) for j in range(i + 1, len(xs)))
    return slope, statistics.median(y - slope * x for x, y in zip(xs, ys))


def _ring_graph(devices: int, length: int, fan_in: int = 1) -> TaskGraph:
    """`length` levels of one fused task per device (sending a small array on), each waiting
    for the previous level's tasks on the `fan_in` devices before it: every device busy at every
    level, fetching `fan_in` inputs (fan_in = devices - 1: all to all, as a reduction or a
    reshard)."""
    tasks = []
    for level in range(length):
        for d in range(devices):
            first = level == 0 and d == 0
            deps = tuple(f"ring{level - 1}-forward-{(d - j) % devices}"
                         for j in range(1, fan_in + 1)) if level else ()
            tasks.append(Task(f"ring{level}-forward-{d}", d, "loss" if first else "forward",
                              _sending(d, (d + 1) % devices, first), deps))
    return TaskGraph(tasks)


def _star_graph(devices: int, rounds: int) -> TaskGraph:
    """`rounds` x (a task on every device -> one on device 0 that needs them all -> ...), then
    a last level on every device: the shape of a data-parallel update (gather, then spread)."""
    tasks, previous = [], ()
    for level in range(2 * rounds + 1):
        spread = level % 2 == 0
        for d in (range(devices) if spread else (0,)):
            first = level == 0 and d == 0
            key = f"star{level}-forward-{d}"
            tasks.append(Task(key, d, "loss" if first else "forward",
                              _sending(d, 0 if d else 1 % devices, first), previous))
        previous = tuple(t.key for t in tasks if t.key.startswith(f"star{level}-"))
    return TaskGraph(tasks)


def scheduler_pace_ms(runner) -> float:
    """Median time of a short chain of probe tasks across two devices: how fast the scheduler
    and the workers' event loops turn tasks around now. Overheads measured earlier are scaled
    by it (a shared host's load changes; a kernel's speed does not say how this changes)."""
    devices = (0, 1) if runner.num_devices > 1 else (0,)
    graph = _probe_graph(devices, PACE_CHAIN)
    executor = runner.executor(graph)
    try:
        run = partial(executor.run, *graph.phases)
        return interleaved_ms({"chain": run}, PACE_RUNS)["chain"]
    finally:
        executor.close()


def effective_cores(runner) -> float:
    """How many devices' worth of work the host really runs at once: the time of a fixed run
    of reference kernels on one device, against the time all devices take to each do that run
    together (from one start to the last end: a shared host's scheduler need not interleave
    them evenly, so each device's own kernel times would not say it). Each together run is
    paired with an alone run just before it, and the median of the pairs' ratios is taken over
    `CORES_ROUNDS`: a shared host's speed drifts within seconds, and timing every alone run
    before every together run put the drift into the ratio (one such measurement gave
    anything from 1.4 to 2.0 cores for two devices on two cores). It is measured once per
    cluster and every prediction's kernels are shared out by it. In this process, devices run
    one after the other: 1."""
    n = runner.num_devices
    if isinstance(runner, LocalRunner):
        return 1.0

    def span(spans: list[tuple[float, float]]) -> float:
        return max(end for _, end in spans) - min(began for began, _ in spans)
    ratios = []
    for _ in range(CORES_ROUNDS):
        alone = span([runner.run(0, reference_span_at, 0.0, runner.cpu_only)])
        together = span(runner.run_all(reference_span_at, time.time() + TOGETHER_LEAD_S,
                                       runner.cpu_only))
        ratios.append(n * alone / together)
    cores = min(float(n), max(1.0, statistics.median(ratios)))
    return min(cores, float(runner.run(0, os.cpu_count) or n))


def shared_cores(cores: float, devices: int) -> float | None:
    """`MachineModel.cores_per_node` for `cores` effective cores: None when every device has
    one."""
    return cores if cores < devices else None


def worker_routes(devices: int, latency: float, bandwidth: float) -> dict:
    """Routes between worker processes: the fetch latency (a round trip, holding nothing), then
    the bytes through the sender's and the receiver's transfer resources at once, so that the
    transfers out of one worker, or into one, share its bandwidth (a worker's event loop moves
    them all)."""
    return {(s, d): (Hop((), latency, LOCAL_BANDWIDTH), Hop((f"send{s}", f"recv{d}"), 0.0,
                                                             bandwidth))
            for s in range(devices) for d in range(devices) if s != d}


def _probe_machine(devices: int, cores: int | None, overheads: Overheads, fetch: float,
                   bandwidth: float) -> MachineModel:
    kind = DeviceKind("probe", 1 << 40, 1e12, 1e12)
    routes = worker_routes(devices, fetch, bandwidth)
    host = tuple((Hop(("client",), 0.0, LOCAL_BANDWIDTH),) for _ in range(devices))
    return MachineModel({"probe": kind}, ("probe",) * devices, (0,) * devices, routes, host,
                        overheads, cores)


def fit_overheads(graphs: dict, measured: dict, devices: int, cores: int | None,
                  action: float, bandwidth: float, start: Sequence[float]) -> list[float]:
    """(task, hop, receive, iteration, fetch, scheduler) ms that make the simulator reproduce
    the probe graphs' measured times: relative least squares, Levenberg-Marquardt from `start`
    (a step is taken only if it fits better), kept >= 0. So calibration and prediction share
    one model of the scheduler, whatever its shape."""
    import numpy
    from ..ops.graph import Graph
    from .simulator import Simulator

    names = list(graphs)
    measured_ms = numpy.array([measured[name] for name in names])

    def predict(p):
        task, hop, receive, iteration, fetch, scheduler = p
        machine = _probe_machine(devices, cores, Overheads(task, action, hop, iteration,
                                                           receive, scheduler), fetch, bandwidth)
        simulator = Simulator(Graph(), None, machine)
        return numpy.array([simulator.simulate_taskgraph(graphs[n]).time for n in names])

    def misfit(f):
        return float(numpy.sum(((measured_ms - f) / measured_ms) ** 2))

    p = numpy.maximum(numpy.array(start, float), 0.0)
    f = predict(p)
    cost, damping, jacobian = misfit(f), FIT_DAMPING, None
    for _ in range(FIT_STEPS):
        if jacobian is None:
            jacobian = numpy.column_stack([(predict(p + FIT_DELTA * e) - f) / FIT_DELTA
                                           for e in numpy.eye(len(p))]) / measured_ms[:, None]
        step = _bounded_step(jacobian, (measured_ms - f) / measured_ms, damping, p)
        candidate = numpy.maximum(p + step, 0.0)
        f_candidate = predict(candidate)
        if misfit(f_candidate) < cost:
            moved = numpy.abs(candidate - p).max()
            p, f, cost, jacobian = candidate, f_candidate, misfit(f_candidate), None
            damping /= 3
            if moved < 1e-3:
                break
        else:
            damping *= 4
    return [float(v) for v in p]


def _bounded_step(jacobian, residual, damping: float, p):
    """A damped Gauss-Newton step that leaves alone the parameters at 0 it would push below 0
    (clipping them afterwards would spoil the step of the parameters they trade off with)."""
    import numpy
    free = numpy.ones(len(p), bool)
    while True:
        j = jacobian[:, free]
        normal = j.T @ j
        step = numpy.zeros(len(p))
        step[free] = numpy.linalg.lstsq(  # lstsq: a parameter the probes cannot tell apart
            normal + damping * numpy.diag(numpy.diag(normal) + 1e-9),  # moves 0
            j.T @ residual, rcond=None)[0]
        blocked = free & (p <= 0) & (step < 0)
        if not blocked.any():
            return step
        free &= ~blocked


def measure_cluster(runner, stream) -> dict:
    """Overheads (ms), links and effective cores of the runner's devices (one node)."""
    print("Calibrating the scheduler and links ...", file=stream, flush=True)
    n = runner.num_devices
    remote = n > 1 and isinstance(runner, DaskRunner)
    pair = (0, 1) if n > 1 else (0,)
    shapes = {("chain", k): _probe_graph(pair, k) for k in CHAIN}
    if remote:
        shapes.update({("ring", k): _ring_graph(n, k) for k in CHAIN})
        shapes.update({("star", k): _star_graph(n, k) for k in STAR})
        if n > 2:
            shapes.update({("all", k): _ring_graph(n, k, n - 1) for k in CHAIN})
    wide_graph, wide = _action_graph(WIDE)
    graphs = dict(shapes, wide=wide)
    if remote:
        graphs["link"] = _probe_graph(pair, 2, nbytes=PROBE_BYTES)
        graphs["link large"] = _probe_graph(pair, 2, nbytes=LINK_BYTES)
    executors = {name: runner.executor(graph, A.Context(wide_graph if name == "wide" else None))
                 for name, graph in graphs.items()}
    probes = {name: partial(executor.run, *graphs[name].phases)
              for name, executor in executors.items()}
    if remote:
        model = ModelProbe(n)
        executors["model"] = runner.executor(model.taskgraph, model.context())
        model.start(executors["model"])
        probes["model"] = partial(model.step, executors["model"])
        for k in RAW_CHAIN:
            probes[("same", k)] = partial(runner.raw_chain_ms, (0,), k)
            probes[("cross", k)] = partial(runner.raw_chain_ms, pair, k)
        probes["submit"] = partial(runner.submit_ms, 0, 1)
        probes["submit large"] = partial(runner.submit_ms, 0, PROBE_BYTES)
    try:
        ms = interleaved_ms(probes, PROBE_RUNS)
    finally:
        for executor in executors.values():
            executor.close()
    per_level, intercept = _fit(CHAIN, [ms[("chain", k)] for k in CHAIN])
    action = max(0.0, (ms["wide"] - ms[("chain", 1)]) / WIDE)
    task = group_overhead_ms(fuse(_probe_graph((0,), 1).tasks)[0])
    cores = effective_cores(runner)
    cores_per_node = shared_cores(cores, n)
    hop, receive, iteration, fetch = max(0.0, per_level - task - action), 0.0, intercept, 0.0
    scheduler = 0.0  # in this process there is no scheduler
    bandwidth, host_bandwidth = LOCAL_BANDWIDTH, LOCAL_BANDWIDTH
    if remote:
        bandwidth = (LINK_BYTES - PROBE_BYTES) / max(ms["link large"] - ms["link"], 1e-3)
        host_bandwidth = PROBE_BYTES / max(ms["submit large"] - ms["submit"], 1e-3)
        same = _fit(RAW_CHAIN, [ms[("same", k)] for k in RAW_CHAIN])[0]
        cross = _fit(RAW_CHAIN, [ms[("cross", k)] for k in RAW_CHAIN])[0]
        fetch = max(0.0, min(cross - same, hop))
        # to start with, what makes a ring's level (a group on every device) dearer than a
        # chain's (one group) is put down to the scheduler; the fit settles it
        ring = _fit(CHAIN, [ms[("ring", k)] for k in CHAIN])[0]
        scheduler = min(max(0.0, (ring - per_level) / (n - 1)), hop - fetch)
        task, hop, receive, iteration, fetch, scheduler = fit_overheads(
            shapes, ms, n, cores_per_node, action, bandwidth,
            (task, hop - fetch - scheduler, 0.0, max(iteration, 0.0), fetch, scheduler))
        # what the fit leaves out of a real iteration goes to the per-iteration overhead
        fitted = _probe_machine(n, cores_per_node, Overheads(task, action, hop, iteration,
                                                             receive, scheduler), fetch, bandwidth)
        iteration += ms["model"] - model.simulated_ms(fitted)
    return {"overheads_ms": {"task": task, "action": action, "hop": hop,
                             "iteration": max(0.0, iteration), "receive": receive,
                             "scheduler": scheduler},
            "model_probe_ms": ms.get("model"),  # the real iteration the overheads reproduce
            "scheduler_ms": ms[("chain", PACE_CHAIN)],  # timed among the probes fitted
            "cores": cores_per_node, "effective_cores": cores,
            "link": {"latency_ms": fetch, "bandwidth_gbs": bandwidth / GB},
            "host": {"latency_ms": 0.0, "bandwidth_gbs": host_bandwidth / GB}}


# ---- the whole calibration ---------------------------------------------------------------------
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
    infos = [runner.run(d, fingerprint, runner.cpu_only) for d in range(runner.num_devices)]
    names = [kind_name(info) for info in infos]
    keys = [_digest({**info, "cache format": CACHE_FORMAT}) for info in infos]
    unique = _unique(calls)
    first_key: dict[str, str] = {}
    for i, (name, key) in enumerate(zip(names, keys)):  # one kind name per fingerprint
        if first_key.setdefault(name, key) != key:
            names[i] = f"{name} #{key[:6]}"
    kinds, costs, partials, now = {}, {}, {}, {}
    measured = cached = 0
    for key in dict.fromkeys(keys):
        device = keys.index(key)
        path = cache_dir() / f"kind-{key}.json"
        data = _load(path) or {"fingerprint": infos[device], "kernels": {}, "partial_bytes": {}}
        now[key] = statistics.median(runner.run(device, reference_ms, runner.cpu_only)
                                     for _ in range(TIMING_ROUNDS))  # it scales every kernel
        if "peak_gflops" not in data:
            flops, copy = runner.run(device, device_speed, runner.cpu_only)
            data["peak_gflops"], data["memory_bandwidth_gbs"] = flops / 1e6, copy / GB
            data["speed_reference_ms"] = now[key]
        missing = [c for c in unique if c.key not in data["kernels"]]
        cached += len(unique) - len(missing)
        if missing:
            _time_missing(runner, device, names[device], missing, data, stream)
            measured += len(missing)
        _store(path, data)
        costs[names[device]] = {k: v * now[key] for k, v in data["kernels"].items()}
        partials.update(data["partial_bytes"])
        slower = now[key] / data["speed_reference_ms"]
        kinds[names[device]] = (data["peak_gflops"] / slower,
                                data["memory_bandwidth_gbs"] / slower)
    hosts = runner.hosts()
    shape = {"kinds": keys, "hosts": [hosts.index(h) for h in hosts],
             "runner": type(runner).__name__, "cache format": CACHE_FORMAT,
             "cluster format": CLUSTER_FORMAT}
    path = cache_dir() / f"cluster-{_digest(shape)}.json"
    cluster = {} if refresh_cluster else _load(path)
    drift = 1.0  # how much slower the scheduler turns tasks around than when it was measured
    if cluster:  # the host's load now
        drift = scheduler_pace_ms(runner) / cluster["scheduler_ms"]
    else:
        cluster = measure_cluster(runner, stream)
        _store(path, {**cluster, "shape": shape})
    machine = _model(runner, names, kinds, costs, partials, cluster, memory, drift)
    print(f"Calibration: {machine.describe()}; {len(unique)} kernel shapes, {measured} "
          f"measured, {cached} from the cache ({cache_dir()})", file=stream)
    return Calibration(machine, measured, cached)


def _unique(calls: Sequence[KernelCall]) -> list[KernelCall]:
    seen: dict[str, KernelCall] = {}
    for call in calls:
        seen.setdefault(call.key, call)
    return list(seen.values())


def _time_missing(runner, device: int, name: str, missing: list[KernelCall], data: dict,
                  stream) -> None:
    tty = getattr(stream, "isatty", lambda: False)()
    started, done, batch = time.perf_counter(), 0, 4
    shown = -1
    for i in range(0, len(missing), batch):
        chunk = missing[i:i + batch]
        for call, (ms, nbytes) in zip(chunk, runner.run(device, time_kernels, chunk,
                                                          runner.cpu_only)):
            data["kernels"][call.key] = ms
            if nbytes:
                data["partial_bytes"][call.key] = nbytes
        done += len(chunk)
        percent = 100 * done // len(missing)
        if tty or percent // 25 > shown or done == len(missing):
            shown = percent // 25
            end = "\r" if tty and done < len(missing) else "\n"
            print(f"Calibrating kernels on device {device} ({name}): {done}/{len(missing)} "
                  f"({time.perf_counter() - started:.1f} s)", end=end, file=stream, flush=True)


def _model(runner, names, kinds, costs, partials, cluster, memory, drift) -> MachineModel:
    limits = runner.memory()
    device_memory = [memory or limit or _host_memory() for limit in limits]
    hosts = runner.hosts()
    nodes = tuple(sorted(set(hosts)).index(h) for h in hosts)
    device_kinds = {}
    for d, name in enumerate(names):
        flops, bandwidth = kinds[name]
        device_kinds[name] = DeviceKind(name, min(m for m, n in zip(device_memory, names)
                                                  if n == name),
                                        flops * 1e6, bandwidth * GB)
    link, host = cluster["link"], cluster["host"]
    routes = worker_routes(runner.num_devices, link["latency_ms"] * drift,
                           link["bandwidth_gbs"] * GB)
    host_routes = tuple((Hop(("client",), host["latency_ms"], host["bandwidth_gbs"] * GB),)
                        for _ in range(runner.num_devices))
    overheads = Overheads(**{k: v * drift for k, v in cluster["overheads_ms"].items()})
    return MachineModel(device_kinds, tuple(names), nodes, routes, host_routes, overheads,
                        cluster["cores"], costs, partials, name="calibrated")


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30
