"""Calibration: a MachineModel measured on the devices a run will use.

* Kernels: every distinct kernel call the search may score (operator + partition shapes + phase,
  `costs.KernelCall`) is timed on one device of each device kind: warm-up, then repeats, median.
* Device kinds: a worker's kind is its hardware and software fingerprint (CPU model and cores or
  GPU name, array module, NumPy/CuPy, Python and flexflow-dask versions, BLAS threads); workers
  with one fingerprint share measurements.
* Scheduler and links: probe task graphs run through the real executor (chains of dependent
  fused tasks across two devices, a fused task of many no-op actions, a transfer of a few MB)
  give the per-iteration, per-task, per-action and per-hop overheads and the bandwidth between
  devices; raw Dask task chains give the fetch latency; submitting arrays gives the client's
  bandwidth to a worker.

Everything is cached on disk (`$FLEXFLOW_DASK_CACHE`, default `~/.cache/flexflow-dask`): one
file per device kind (kernel times) and one per cluster shape (overheads, links), keyed by the
fingerprints, so a second run of the same model on the same hardware measures nothing.
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
from pathlib import Path
from typing import Any, Callable, Sequence

from ..ops.base import Part
from . import actions as A
from .cluster import array_module
from .costs import KernelCall
from .executor import LocalExecutor, fuse, run_group
from .machine import GB, DeviceKind, Hop, MachineModel, Overheads
from .taskgraph import Task, TaskGraph

CACHE_ENV = "FLEXFLOW_DASK_CACHE"
WARMUP, REPEATS, BUDGET_MS = 1, 5, 400.0  # per kernel: repeats stop early past the budget
PROBE_BYTES = 4 << 20
CHAIN = (1, 2, 3, 4, 6)  # lengths of the dependent-hop probes
PROBE_RUNS = 5
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
            "flexflow_dask": metadata.version("flexflow-dask")}
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


def _median_ms(fn: Callable[[], Any], sync: Callable[[], None]) -> tuple[float, Any]:
    result = None
    for _ in range(WARMUP):
        result = fn()
        sync()
    samples: list[float] = []
    while len(samples) < REPEATS and (not samples or sum(samples) < BUDGET_MS):
        start = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples), result


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
    """(median ms, bytes of the result) of each call, on this process's device."""
    import numpy
    xp = array_module(cpu_only)
    sync = _synchronizer(xp)
    rng = numpy.random.default_rng(0)
    out = []
    for call in calls:
        ms, result = _median_ms(_kernel(xp, rng, call), sync)
        out.append((ms, _nbytes(result) if call.phase.endswith("partial") else 0))
    return out


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
            out.setdefault(self.dst, []).append(("partial", ("probe",),
                                                 numpy.zeros(self.nbytes, "uint8")))
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

    def executor(self, taskgraph: TaskGraph):
        from .actions import Context
        return LocalExecutor(taskgraph, Context(None), self.num_devices,
                             array_module(self.cpu_only))

    def hosts(self) -> list[str]:
        return ["local"] * self.num_devices

    def memory(self) -> list[int | None]:
        return [None] * self.num_devices

    def raw_chain_ms(self, devices: Sequence[int], length: int) -> float:
        return 0.0

    def submit_ms(self, device: int, nbytes: int) -> float:
        return 0.0


class DaskRunner:
    """Device d is the worker `workers[d]` of a Dask cluster."""

    def __init__(self, client, workers: list[str], cpu_only: bool = False):
        self.client = client
        self.workers = workers
        self.num_devices = len(workers)
        self.cpu_only = cpu_only

    def run(self, device: int, fn, *args):
        return self.client.submit(fn, *args, workers=[self.workers[device]],
                                  allow_other_workers=False, pure=False).result()

    def executor(self, taskgraph: TaskGraph):
        from .actions import Context
        from .distributed import DaskExecutor
        return DaskExecutor(taskgraph, Context(None), self.client, self.workers, self.cpu_only)

    def hosts(self) -> list[str]:
        return [w.rsplit("://", 1)[-1].rsplit(":", 1)[0] for w in self.workers]

    def memory(self) -> list[int | None]:
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return [info[w].get("memory_limit") or None for w in self.workers]

    def raw_chain_ms(self, devices: Sequence[int], length: int) -> float:
        """A chain of `length` dependent tiny tasks visiting `devices` in turn."""
        start = time.perf_counter()
        future = None
        for i in range(length):
            worker = self.workers[devices[i % len(devices)]]
            future = self.client.submit(_noop, future, i, workers=[worker],
                                        allow_other_workers=False, pure=False)
        future.result()
        return (time.perf_counter() - start) * 1e3

    def submit_ms(self, device: int, nbytes: int) -> float:
        import numpy
        payload = numpy.zeros(nbytes, "uint8")
        start = time.perf_counter()
        self.client.submit(_noop, payload, workers=[self.workers[device]],
                           allow_other_workers=False, pure=False).result()
        return (time.perf_counter() - start) * 1e3


# ---- scheduler and link probes -----------------------------------------------------------------
def _probe_graph(devices: Sequence[int], length: int, actions: int = 1, nbytes: int = 0,
                 metrics: bool = True) -> TaskGraph:
    """A chain of `length` fused tasks visiting `devices` in turn, each of `actions` no-op
    actions; the first may emit `nbytes` for the second and metric sums."""
    tasks, previous = [], ()
    for i in range(length):
        device = devices[i % len(devices)]
        keys = []
        for k in range(actions):
            action, phase = A.Receive(), "forward"
            if i == 0 and k == 0:
                target = devices[1 % len(devices)]
                action = Probe(nbytes if target != device else 0, target, metrics)
                phase = "loss" if metrics else "forward"
            key = f"probe{i}-forward-{k}"
            tasks.append(Task(key, device, phase, action, previous))
            keys.append(key)
        previous = tuple(keys)
    return TaskGraph(tasks)


def _timed_run_ms(runner, taskgraph: TaskGraph) -> float:
    executor = runner.executor(taskgraph)
    phases = tuple(dict.fromkeys(t.phase for t in taskgraph.tasks))
    try:
        executor.run(*phases)  # warm-up
        samples = []
        for _ in range(PROBE_RUNS):
            start = time.perf_counter()
            executor.run(*phases)
            samples.append((time.perf_counter() - start) * 1e3)
    finally:
        executor.close()
    return statistics.median(samples)


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares slope and intercept."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys))
             / sum((x - mx) ** 2 for x in xs))
    return slope, my - slope * mx


def measure_cluster(runner, stream) -> dict:
    """Overheads (ms) and link figures of the runner's devices."""
    pair = (0, 1) if runner.num_devices > 1 else (0,)
    print("Calibrating the scheduler and links ...", file=stream, flush=True)
    chain = [_timed_run_ms(runner, _probe_graph(pair, n)) for n in CHAIN]
    per_hop, intercept = _fit(CHAIN, chain)
    wide = [_timed_run_ms(runner, _probe_graph((0,), 1, m)) for m in (1, 201)]
    action = max(0.0, (wide[1] - wide[0]) / 200)
    task = group_overhead_ms(fuse(_probe_graph((0,), 1).tasks)[0])
    fetch, bandwidth, host_latency, host_bandwidth = 0.0, LOCAL_BANDWIDTH, 0.0, LOCAL_BANDWIDTH
    if runner.num_devices > 1 and isinstance(runner, DaskRunner):
        same = _fit(CHAIN, [statistics.median(runner.raw_chain_ms((0,), n) for _ in range(3))
                            for n in CHAIN])[0]
        cross = _fit(CHAIN, [statistics.median(runner.raw_chain_ms(pair, n) for _ in range(3))
                             for n in CHAIN])[0]
        fetch = max(0.0, cross - same)
        empty = _timed_run_ms(runner, _probe_graph(pair, 2))
        full = _timed_run_ms(runner, _probe_graph(pair, 2, nbytes=PROBE_BYTES))
        bandwidth = PROBE_BYTES / max(full - empty, 1e-3)
        small = statistics.median(runner.submit_ms(0, 1) for _ in range(PROBE_RUNS))
        large = statistics.median(runner.submit_ms(0, PROBE_BYTES) for _ in range(PROBE_RUNS))
        host_bandwidth = PROBE_BYTES / max(large - small, 1e-3)
    hop = max(0.0, per_hop - task - action - fetch)
    iteration = max(0.0, intercept + fetch)
    return {"overheads_ms": {"task": task, "action": action, "hop": hop,
                             "iteration": iteration},
            "link": {"latency_ms": fetch, "bandwidth_gbs": bandwidth / GB},
            "host": {"latency_ms": host_latency, "bandwidth_gbs": host_bandwidth / GB}}


# ---- the whole calibration ---------------------------------------------------------------------
@dataclass
class Calibration:
    machine: MachineModel
    measured: int   # kernel calls timed in this run (0 when everything came from the cache)
    cached: int


def calibrate(runner, calls: Sequence[KernelCall], memory: int | None = None,
              stream=None) -> Calibration:
    """Measure (or read from the cache) what `calls` cost on each device kind of `runner`, and
    the scheduler and links; returns the machine model. Prints to `stream` (sys.stdout)."""
    stream = stream or sys.stdout
    infos = [runner.run(d, fingerprint, runner.cpu_only) for d in range(runner.num_devices)]
    names = [kind_name(info) for info in infos]
    keys = [_digest(info) for info in infos]
    unique = _unique(calls)
    first_key: dict[str, str] = {}
    for i, (name, key) in enumerate(zip(names, keys)):  # one kind name per fingerprint
        if first_key.setdefault(name, key) != key:
            names[i] = f"{name} #{key[:6]}"
    kinds, costs, partials = {}, {}, {}
    measured = cached = 0
    for key in dict.fromkeys(keys):
        device = keys.index(key)
        path = cache_dir() / f"kind-{key}.json"
        data = _load(path) or {"fingerprint": infos[device], "kernels": {}, "partial_bytes": {}}
        if "peak_gflops" not in data:
            flops, copy = runner.run(device, device_speed, runner.cpu_only)
            data["peak_gflops"], data["memory_bandwidth_gbs"] = flops / 1e6, copy / GB
        missing = [c for c in unique if c.key not in data["kernels"]]
        cached += len(unique) - len(missing)
        if missing:
            _time_missing(runner, device, names[device], missing, data, stream)
            measured += len(missing)
        _store(path, data)
        costs[names[device]] = data["kernels"]
        partials.update(data["partial_bytes"])
        kinds[names[device]] = (data["peak_gflops"], data["memory_bandwidth_gbs"])
    hosts = runner.hosts()
    shape = {"kinds": keys, "hosts": [hosts.index(h) for h in hosts],
             "runner": type(runner).__name__}
    path = cache_dir() / f"cluster-{_digest(shape)}.json"
    cluster = _load(path)
    if not cluster:
        cluster = measure_cluster(runner, stream)
        _store(path, {**cluster, "shape": shape})
    machine = _model(runner, infos, names, kinds, costs, partials, cluster, memory)
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


def _model(runner, infos, names, kinds, costs, partials, cluster, memory) -> MachineModel:
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
    routes = {(s, d): (Hop((f"link{s}-{d}",), link["latency_ms"], link["bandwidth_gbs"] * GB),)
              for s in range(runner.num_devices) for d in range(runner.num_devices) if s != d}
    host_routes = tuple((Hop(("client",), host["latency_ms"], host["bandwidth_gbs"] * GB),)
                        for _ in range(runner.num_devices))
    cores = None
    if all("gpu" not in info for info in infos):
        per_node = max(nodes.count(n) for n in set(nodes))
        available = min(info["cores"] or per_node for info in infos)
        cores = available if available < per_node else None
    overheads = Overheads(**cluster["overheads_ms"])
    return MachineModel(device_kinds, tuple(names), nodes, routes, host_routes, overheads, cores,
                        costs, partials, name="calibrated")


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30
