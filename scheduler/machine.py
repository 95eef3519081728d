"""Machine models: what the simulator knows about the devices a strategy runs on.

A `MachineModel` has devices (each of a `DeviceKind`: memory, peak FLOP rate, memory bandwidth,
per-kernel overhead), a route between every ordered pair of devices and from the client to each
device (a chain of `Hop`s, each occupying named link resources), and the overheads of the Dask
executor: per fused group, per task action, per dependent hop, per iteration, per program the
Dask scheduler dispatches. Kernel times come from a measured table (calibration) where it has
the kernel, and otherwise from FLOPs and bytes against the device kind's peak.

Units everywhere in the simulator: milliseconds and bytes (bandwidths in bytes per ms), as in
FlexFlow's simulator.

Sources: `calibration.calibrate` (the live cluster), `read` (FlexFlow's version-1 machine file or
our JSON form), `preset` (named clusters for planning). A file that cannot be read, is malformed
or describes an impossible machine (more than `MAX_DEVICES` devices, a missing link, a number
that is not finite or has the wrong sign, a time over `MAX_MS` or a rate under `MIN_RATE`)
raises `MachineError` naming the file and the line or entry, before the simulator uses it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

GB = 1e9 / 1e3  # bytes per ms in one GB/s
FLEXFLOW_GB = 1024 * 1024  # FlexFlow's machine files: "GB/s" x 1024 x 1024 = bytes per ms
MAX_DEVICES = 1024  # a machine model holds a route per ordered pair of devices
# Bounds on what one number may say, far beyond any real machine, so that no sum or quotient of
# them in the simulator overflows or divides by (nearly) zero.
MAX_MS = 3.6e6  # a latency, overhead or kernel cost: an hour
MIN_RATE = 1.0  # a bandwidth in bytes per ms, a FLOP rate in FLOPs per ms: a thousand a second


class MachineError(ValueError):
    """A machine model file or preset name is malformed; the message names the file and line."""


@dataclass(frozen=True)
class DeviceKind:
    name: str
    memory: int                    # bytes
    peak_flops: float              # FLOP per ms
    mem_bandwidth: float           # bytes per ms
    kernel_overhead: float = 0.0   # ms per kernel call
    efficiency: float = 1.0        # fraction of peak FLOPs our kernels reach

    def analytic(self, flops: float, nbytes: float) -> float:
        """Roofline estimate of a kernel: compute- or memory-bound, plus launch overhead."""
        return (max(flops / (self.peak_flops * self.efficiency), nbytes / self.mem_bandwidth)
                + self.kernel_overhead)


@dataclass(frozen=True)
class Hop:
    """One stage of a transfer: it waits for all its resources, then holds them for
    `latency + bytes / bandwidth`."""

    resources: tuple[str, ...]
    latency: float     # ms
    bandwidth: float   # bytes per ms

    def time(self, nbytes: float) -> float:
        return self.latency + nbytes / self.bandwidth


Route = tuple[Hop, ...]


@dataclass(frozen=True)
class Overheads:
    """The executor's costs beyond kernels and transfers (all ms)."""

    task: float = 0.0       # per fused group, on its device (taking its inputs in, running it)
    action: float = 0.0     # per action inside a fused group
    hop: float = 0.0        # from the last dependency's end (or submission) to a group's dispatch
    iteration: float = 0.0  # per iteration: submitting the programs, waiting, taking metrics
    receive: float = 0.0    # per input received from another device, on the receiving device
    scheduler: float = 0.0  # per device's program, on the one scheduler that dispatches them


@dataclass(frozen=True)
class RingProtocol:
    """One protocol of a collective library's ring algorithm, as NCCL's tuning model has them
    (src/graph/tuning.cc): a base latency, then one latency per step around the ring, those
    between nodes at `network_step`; its bytes at `bandwidth_share` of the ring's bandwidth.
    All times in ms."""

    base: float
    step: float
    network_step: float
    bandwidth_share: float = 1.0

    def ms(self, steps: int, network_steps: int, step_bytes: float, bandwidth: float) -> float:
        return (self.base + (steps - network_steps) * self.step + network_steps
                * self.network_step + steps * step_bytes / (bandwidth * self.bandwidth_share))


# NCCL's ring figures (src/graph/tuning.cc: baseLat and hwLat, in us): the Simple protocol
# reaches the links' bandwidth; LL, for small messages, a quarter of it at lower latency
NCCL_SIMPLE_PCIE = RingProtocol(0.0084, 0.0057, 0.0096)
NCCL_LL_PCIE = RingProtocol(0.0036, 0.0010, 0.0027, 0.25)
NCCL_SIMPLE_NVLINK = RingProtocol(0.0084, 0.0034, 0.0096)
NCCL_LL_NVLINK = RingProtocol(0.0036, 0.00047, 0.0027, 0.25)


@dataclass(frozen=True)
class Collectives:
    """How long a collective takes: ring algorithms over the devices, of 2(n-1) steps for an
    all-reduce (each device sending its 1/n share of the buffer at each step) and n-1 for an
    all-gather (each step passing on one device's part), in the fastest of the library's
    `protocols`; a step crossing nodes at the network's latency (the steps between nodes
    counted as NCCL counts them: twice, or once for a gather, per node boundary). The bytes go
    at `bandwidth` (bytes per ms: what calibration measured of the library itself), or at the
    slowest hop of the ring's routes."""

    protocols: tuple[RingProtocol, ...] = (NCCL_SIMPLE_PCIE, NCCL_LL_PCIE)
    bandwidth: float | None = None

    def ring_ms(self, routes: dict, nodes: tuple[int, ...], devices: tuple[int, ...],
                nbytes: float, gather: bool = False) -> float:
        """A collective of `nbytes` (a device's) over `devices`, in that order around the
        ring."""
        n = len(devices)
        if n < 2:
            return 0.0
        rounds = 1 if gather else 2
        steps, network_steps = rounds * (n - 1), rounds * (len({nodes[d] for d in devices}) - 1)
        bandwidth = self.bandwidth or min(
            min(hop.bandwidth for hop in routes[(a, b)])
            for a, b in zip(devices, devices[1:] + devices[:1]))
        step_bytes = nbytes if gather else nbytes / n
        return min(p.ms(steps, network_steps, step_bytes, bandwidth) for p in self.protocols)


@dataclass
class MachineModel:
    kinds: dict[str, DeviceKind]
    device_kinds: tuple[str, ...]        # kind of each device
    nodes: tuple[int, ...]               # node (host) of each device
    routes: dict[tuple[int, int], Route]  # every ordered pair of distinct devices
    host_routes: tuple[Route, ...]       # client -> each device (input batches)
    overheads: Overheads = Overheads()
    cores_per_node: float | None = None  # cores a node's devices share (None: one each)
    costs: dict[str, dict[str, float]] = field(default_factory=dict)  # kind -> kernel key -> ms
    partial_bytes: dict[str, int] = field(default_factory=dict)  # kernel key -> partial size
    name: str = "machine"
    collectives: Collectives = Collectives()

    @property
    def num_devices(self) -> int:
        return len(self.device_kinds)

    def kind(self, device: int) -> DeviceKind:
        return self.kinds[self.device_kinds[device]]

    def memory(self, device: int) -> int:
        return self.kind(device).memory

    def route(self, src: int, dst: int) -> Route:
        return self.routes[(src, dst)]

    def kernel_time(self, device: int, key: str, flops: float, nbytes: float) -> float:
        kind = self.kind(device)
        measured = self.costs.get(kind.name, {}).get(key)
        return measured if measured is not None else kind.analytic(flops, nbytes)

    def copy_time(self, device: int, nbytes: float) -> float:
        return nbytes / self.kind(device).mem_bandwidth

    def collective_ms(self, devices: tuple[int, ...], nbytes: float, gather: bool = False
                      ) -> float:
        """An all-reduce of `nbytes` over `devices`, or with `gather` the all-gather of
        `nbytes` from each (`Collectives`)."""
        return self.collectives.ring_ms(self.routes, self.nodes, devices, nbytes, gather)

    def describe(self) -> str:
        counts: dict[str, int] = {}
        for kind in self.device_kinds:
            counts[kind] = counts.get(kind, 0) + 1
        devices = ", ".join(f"{n} x {k}" for k, n in counts.items())
        return f"{self.name}: {devices} on {len(set(self.nodes))} node(s)"

    # ---- JSON form ------------------------------------------------------------------------------
    def to_json(self) -> dict:
        def hops(route):
            return [{"resources": list(h.resources), "latency_ms": h.latency,
                     "bandwidth_gbs": h.bandwidth / GB} for h in route]
        return {
            "format": "flexflow-dask machine model", "version": 1, "name": self.name,
            "kinds": {k.name: {"memory_bytes": k.memory, "peak_gflops": k.peak_flops / 1e6,
                               "memory_bandwidth_gbs": k.mem_bandwidth / GB,
                               "kernel_overhead_ms": k.kernel_overhead,
                               "efficiency": k.efficiency} for k in self.kinds.values()},
            "devices": [{"kind": k, "node": n} for k, n in zip(self.device_kinds, self.nodes)],
            "cores_per_node": self.cores_per_node,
            "overheads_ms": vars(self.overheads),
            "links": [{"src": s, "dst": d, "hops": hops(r)} for (s, d), r in self.routes.items()],
            "host_links": [hops(r) for r in self.host_routes],
            "costs_ms": self.costs, "partial_bytes": self.partial_bytes,
            "collectives": {"protocols": [vars(p) for p in self.collectives.protocols],
                            "bandwidth_gbs": None if self.collectives.bandwidth is None
                            else self.collectives.bandwidth / GB},
        }

    @staticmethod
    def from_json(data: dict, source: str = "<json>") -> "MachineModel":
        try:
            kinds = {name: DeviceKind(name, int(k["memory_bytes"]), float(k["peak_gflops"]) * 1e6,
                                      float(k["memory_bandwidth_gbs"]) * GB,
                                      float(k.get("kernel_overhead_ms", 0.0)),
                                      float(k.get("efficiency", 1.0)))
                     for name, k in data["kinds"].items()}
            devices = data["devices"]
            device_kinds = tuple(str(d["kind"]) for d in devices)
            nodes = tuple(int(d["node"]) for d in devices)

            def route(hops) -> Route:
                return tuple(Hop(tuple(h["resources"]), float(h["latency_ms"]),
                                 float(h["bandwidth_gbs"]) * GB) for h in hops)
            routes = {(int(link["src"]), int(link["dst"])): route(link["hops"])
                      for link in data["links"]}
            host_routes = tuple(route(h) for h in data["host_links"])
            overheads = Overheads(**{k: float(v) for k, v in data.get("overheads_ms", {}).items()})
            model = MachineModel(kinds, device_kinds, nodes, routes, host_routes, overheads,
                                 data.get("cores_per_node"),
                                 {k: dict(v) for k, v in data.get("costs_ms", {}).items()},
                                 dict(data.get("partial_bytes", {})), data.get("name", source),
                                 _collectives(data.get("collectives")))
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as error:
            raise MachineError(f"{source}: not a valid machine model ({type(error).__name__}: "
                               f"{error})") from None
        model.check(source)
        return model

    def _check_collectives(self, source: str) -> None:
        if not self.collectives.protocols:
            raise MachineError(f"{source}: collectives need at least one protocol")
        for index, protocol in enumerate(self.collectives.protocols):
            where = f"{source}: collectives' protocol {index}"
            for name in ("base", "step", "network_step"):
                _check_time(getattr(protocol, name), f"{where}: {name}")
            if not (_positive(protocol.bandwidth_share) and protocol.bandwidth_share <= 1):
                raise MachineError(f"{where}: bandwidth_share must be in (0, 1], got "
                                   f"{protocol.bandwidth_share!r}")
        if self.collectives.bandwidth is not None:
            _check_rate(self.collectives.bandwidth, f"{source}: collectives' bandwidth", "bytes")

    def check(self, source: str) -> None:
        """Refuse what the simulator cannot use: too many devices, undefined kinds, missing
        links, and numbers that are not finite, not of the sign they must have, or absurd
        (a time over `MAX_MS`, a rate under `MIN_RATE`), naming the entry."""
        n = self.num_devices
        if not 1 <= n <= MAX_DEVICES:
            raise MachineError(f"{source}: {n} devices; a machine model has 1 to {MAX_DEVICES}")
        for kind in self.kinds.values():
            _check_kind(kind, source)
        for name, ms in vars(self.overheads).items():
            _check_time(ms, f"{source}: overhead {name!r}")
        if self.cores_per_node is not None and not (
                _non_negative(self.cores_per_node) and 1 <= self.cores_per_node <= MAX_DEVICES):
            raise MachineError(f"{source}: cores_per_node must be a number from 1 to "
                               f"{MAX_DEVICES}, or null; got {self.cores_per_node!r}")
        for kind, table in self.costs.items():
            if not isinstance(table, dict):
                raise MachineError(f"{source}: kernel costs must be numbers of ms >= 0 per kind")
            for key, ms in table.items():
                _check_time(ms, f"{source}: kernel cost {key!r} of kind {kind!r}")
        if not all(type(b) is int and b >= 0 for b in self.partial_bytes.values()):
            raise MachineError(f"{source}: partial sizes must be whole numbers of bytes >= 0")
        self._check_collectives(source)
        self._check_links(source)

    def _check_links(self, source: str) -> None:
        n = self.num_devices
        unknown = sorted(set(self.device_kinds) - set(self.kinds))
        if unknown:
            raise MachineError(f"{source}: devices of undefined kinds {unknown}")
        missing = [(s, d) for s in range(n) for d in range(n) if s != d and (s, d) not in
                   self.routes]
        if missing:
            raise MachineError(f"{source}: no link between devices {missing[:4]}"
                               f"{' ...' if len(missing) > 4 else ''}")
        if len(self.host_routes) != n:
            raise MachineError(f"{source}: {len(self.host_routes)} host links for {n} devices")
        routes = [(f"link {s} -> {d}", r) for (s, d), r in self.routes.items()]
        routes += [(f"host link to device {d}", r) for d, r in enumerate(self.host_routes)]
        for what, route in routes:
            for index, hop in enumerate(route):
                where = f"{source}: {what}, hop {index}"
                if not all(isinstance(r, str) for r in hop.resources):
                    raise MachineError(f"{where}: resources must be named by strings")
                _check_time(hop.latency, f"{where}: latency")
                _check_rate(hop.bandwidth, f"{where}: bandwidth", "bytes")


def _collectives(data: dict | None) -> Collectives:
    """The JSON form's collectives (NCCL's PCIe figures when absent)."""
    if data is None:
        return Collectives()
    bandwidth = data.get("bandwidth_gbs")
    protocols = tuple(RingProtocol(float(p["base"]), float(p["step"]), float(p["network_step"]),
                                   float(p.get("bandwidth_share", 1.0)))
                      for p in data["protocols"])
    return Collectives(protocols, None if bandwidth is None else float(bandwidth) * GB)


def _check_kind(kind: DeviceKind, source: str) -> None:
    where = f"{source}: device kind {kind.name!r}"
    if not (_positive(kind.memory) and _positive(kind.efficiency)):
        raise MachineError(f"{where} needs a positive memory and efficiency, got "
                           f"{kind.memory!r} and {kind.efficiency!r}")
    _check_rate(kind.peak_flops * kind.efficiency if _positive(kind.peak_flops) else
                kind.peak_flops, f"{where}: peak FLOP rate x efficiency", "FLOPs")
    _check_rate(kind.mem_bandwidth, f"{where}: memory bandwidth", "bytes")
    _check_time(kind.kernel_overhead, f"{where}: kernel overhead")


def _check_time(ms, what: str) -> None:
    if not (_non_negative(ms) and ms <= MAX_MS):
        raise MachineError(f"{what} is {ms!r} ms; it must be a number from 0 to {MAX_MS:g}")


def _check_rate(per_ms, what: str, unit: str) -> None:
    if not (_non_negative(per_ms) and per_ms >= MIN_RATE):
        raise MachineError(f"{what} is {per_ms!r} {unit} per ms; it must be a finite number of "
                           f"at least {MIN_RATE:g}")


def _positive(x) -> bool:
    return _non_negative(x) and x > 0


def _non_negative(x) -> bool:
    """A finite number >= 0 (an int of any size, or a float; not a bool)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return (isinstance(x, int) or math.isfinite(x)) and x >= 0


def save(machine: MachineModel, path: str) -> None:
    Path(path).write_text(json.dumps(machine.to_json(), indent=1) + "\n")


# ---- building machines from a topology ----------------------------------------------------------
def cluster(name: str, kind: DeviceKind, nodes: int, per_node: int,
            link: Callable[[int, int, int, int], Route], host: Callable[[int, int], Route],
            overheads: Overheads) -> MachineModel:
    """`nodes` x `per_node` devices of one kind; `link(src, dst, src_node, dst_node)` and
    `host(device, node)` give the routes."""
    n = nodes * per_node
    node_of = tuple(d // per_node for d in range(n))
    routes = {(s, d): link(s, d, node_of[s], node_of[d])
              for s in range(n) for d in range(n) if s != d}
    return MachineModel({kind.name: kind}, (kind.name,) * n, node_of, routes,
                        tuple(host(d, node_of[d]) for d in range(n)), overheads, name=name)


# Planning presets. Device figures are the vendors' FP32 peaks and memory bandwidths; our kernels
# are assumed to reach half the peak FLOPs. The Dask overheads are assumptions for a scheduler on
# dedicated hosts (measure a real cluster with calibration instead); the scheduler's own time per
# task is the low end of the 200 us to 1 ms per task that Dask's documentation gives.
PRESET_OVERHEADS = Overheads(task=0.2, action=0.01, hop=1.0, iteration=2.0, scheduler=0.2)
P100 = DeviceKind("P100", 16 << 30, 10.6e9, 732 * GB, 0.05, 0.5)
K80 = DeviceKind("K80", 12 << 30, 4.37e9, 240 * GB, 0.05, 0.5)
H100 = DeviceKind("H100", 80 << 30, 67e9, 3350 * GB, 0.02, 0.5)
# NCCL's figures for NVLink inside a node; K80 nodes keep the PCIe ones (`Collectives`' default)
NVLINK_COLLECTIVES = Collectives((NCCL_SIMPLE_NVLINK, NCCL_LL_NVLINK))


def _p100_4x4() -> MachineModel:
    """The FlexFlow paper's first cluster: 4 nodes x 4 P100, NVLink inside a node (FlexFlow's
    20 GB/s per GPU pair), 100 Gb/s EDR InfiniBand between nodes (one NIC per node each way)."""
    def link(s, d, sn, dn):
        if sn == dn:
            return (Hop((f"nvlink{s}-{d}",), 0.001, 20 * GB),)
        return (Hop((f"nic-out{sn}", f"nic-in{dn}"), 0.005, 12.5 * GB),)
    return replace(cluster("p100-4x4", P100, 4, 4, link, _pcie_host(12 * GB), PRESET_OVERHEADS),
                   collectives=NVLINK_COLLECTIVES)


def _k80_16x4() -> MachineModel:
    """The paper's second cluster: 16 nodes x 4 K80 GPUs; adjacent GPU pairs share a PCIe
    switch (12 GB/s), other pairs cross the node's shared PCIe switch, nodes on 56 Gb/s
    InfiniBand."""
    def link(s, d, sn, dn):
        if sn == dn and s // 2 == d // 2:
            return (Hop((f"pcie-pair{s // 2}",), 0.002, 12 * GB),)
        if sn == dn:
            return (Hop((f"pcie-switch{sn}",), 0.004, 12 * GB),)
        return (Hop((f"nic-out{sn}", f"nic-in{dn}"), 0.005, 7 * GB),)
    return cluster("k80-16x4", K80, 16, 4, link, _pcie_host(12 * GB), PRESET_OVERHEADS)


def _h100_8() -> MachineModel:
    """One node of 8 H100 SXM GPUs on NVSwitch (NVLink 4: 450 GB/s per GPU each way)."""
    def link(s, d, sn, dn):
        return (Hop((f"nvswitch-out{s}", f"nvswitch-in{d}"), 0.002, 450 * GB),)
    return replace(cluster("h100-8", H100, 1, 8, link, _pcie_host(55 * GB), PRESET_OVERHEADS),
                   collectives=NVLINK_COLLECTIVES)


def _pcie_host(bandwidth: float):
    def host(device, node):
        return (Hop((f"host-out{node}", f"pcie-in{device}"), 0.01, bandwidth),)
    return host


PRESETS = {"p100-4x4": _p100_4x4, "k80-16x4": _k80_16x4, "h100-8": _h100_8}


def preset(name: str) -> MachineModel:
    if name not in PRESETS:
        raise MachineError(f"unknown machine preset {name!r}; presets: {sorted(PRESETS)}")
    return PRESETS[name]()


# ---- FlexFlow's version-1 machine file ----------------------------------------------------------
FLEXFLOW_NUMBERS = ("num_nodes", "num_sockets_per_node", "num_cpus_per_socket",
                    "num_gpus_per_socket", "nic_persocket")
FLEXFLOW_LINKS = ("membus", "upi", "nic", "pci", "nvlink")
FLEXFLOW_PATHS = tuple(f"{scope}_{a}_to_{b}" for scope in ("intra_socket", "inter_socket",
                                                            "inter_node")
                       for a in ("sys_mem", "gpu_fb_mem") for b in ("sys_mem", "gpu_fb_mem"))
# ours, optional: what FlexFlow took from the GPU it ran on, and the Dask overheads
EXTENSIONS = {"gpu_fb_mem_mb": None, "gpu_peak_tflops": 10.6, "gpu_mem_bandwidth": 732.0,
              "gpu_kernel_overhead": 0.05, "gpu_efficiency": 0.5,
              "task_overhead": PRESET_OVERHEADS.task, "action_overhead": PRESET_OVERHEADS.action,
              "hop_latency": PRESET_OVERHEADS.hop, "iteration_overhead": PRESET_OVERHEADS.iteration,
              "scheduler_overhead": PRESET_OVERHEADS.scheduler}
COMPONENTS = ("membus", "upi", "nic", "pci_to_host", "pci_to_dev", "nvlink")


def parse_flexflow(text: str, source: str) -> dict[str, object]:
    """`key = value` lines, `#` comments; numbers, or component lists for the path keys."""
    known = set(FLEXFLOW_NUMBERS) | {f"{c}_{q}" for c in FLEXFLOW_LINKS
                                     for q in ("latency", "bandwidth")} | set(EXTENSIONS)
    values: dict[str, object] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = (part.strip() for part in line.partition("="))
        where = f"{source}, line {number}"
        if not sep or not key:
            raise MachineError(f"{where}: expected 'key = value', got {line!r}")
        if key in FLEXFLOW_PATHS:
            path = value.split()
            bad = [c for c in path if c not in COMPONENTS]
            if bad or not path:
                raise MachineError(f"{where}: {key} must list components of {COMPONENTS}, "
                                   f"got {value!r}")
            values[key] = tuple(path)
        elif key in known:
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if not math.isfinite(number):
                raise MachineError(f"{where}: {key} must be a number (finite), got {value!r}")
            problem = _flexflow_number_problem(key, number)
            if problem:
                raise MachineError(f"{where}: {key} is {value}; it {problem}")
            values[key] = number
        else:
            raise MachineError(f"{where}: unknown key {key!r}")
    return values


def _flexflow_number_problem(key: str, number: float) -> str | None:
    """Why a time or rate of a FlexFlow machine file cannot be right (None: it can): the bounds
    of `MachineModel.check`, in the file's units."""
    if key.endswith(("_latency", "_overhead")) and not 0 <= number <= MAX_MS:
        return f"must be from 0 to {MAX_MS:g} ms"
    per_ms = {"gpu_peak_tflops": 1e9, "gpu_mem_bandwidth": GB}.get(
        key, FLEXFLOW_GB if key.endswith("_bandwidth") else None)
    if per_ms is not None and number * per_ms < MIN_RATE:
        return f"must be at least {MIN_RATE / per_ms:g}"
    return None


def _flexflow_topology(v: dict, source: str) -> tuple[int, int, int]:
    """(nodes, sockets per node, GPUs per socket) of a FlexFlow machine file's values."""
    for key in ("num_nodes", "num_sockets_per_node", "num_gpus_per_socket"):
        if v.get(key, 0) < 1 or v[key] != int(v[key]):
            raise MachineError(f"{source}: {key} must be given, a whole number of at least 1")
    nodes, sockets, gpus = (int(v[k]) for k in ("num_nodes", "num_sockets_per_node",
                                                  "num_gpus_per_socket"))
    if nodes * sockets * gpus > MAX_DEVICES:
        raise MachineError(f"{source}: {nodes} x {sockets} x {gpus} GPUs; a machine model has at "
                           f"most {MAX_DEVICES}")
    return nodes, sockets, gpus


def _flexflow_gpu(ext: dict, gpu_memory: int | None) -> DeviceKind:
    """The GPU of a FlexFlow machine file, from our extension keys (or their defaults)."""
    memory = (int(ext["gpu_fb_mem_mb"]) << 20 if ext["gpu_fb_mem_mb"] else
              gpu_memory or (16 << 30))
    return DeviceKind("GPU", memory, float(ext["gpu_peak_tflops"]) * 1e9,
                      float(ext["gpu_mem_bandwidth"]) * GB, float(ext["gpu_kernel_overhead"]),
                      float(ext["gpu_efficiency"]))


def from_flexflow(text: str, source: str, gpu_memory: int | None = None) -> MachineModel:
    """FlexFlow's EnhancedMachineModel: GPUs numbered node by node, socket by socket; a transfer
    follows the file's path for its scope, hop by hop (store and forward, as FlexFlow's single
    segment does), over one resource per component instance. UPI and NIC are split into an out
    half at the source and an in half at the destination, each with half the latency and twice
    the bandwidth, as FlexFlow models them."""
    v = parse_flexflow(text, source)
    nodes, sockets, gpus = _flexflow_topology(v, source)
    ext = {k: v.get(k, default) for k, default in EXTENSIONS.items()}
    kind = _flexflow_gpu(ext, gpu_memory)
    per_node = sockets * gpus
    socket_of = [d // gpus for d in range(nodes * per_node)]  # global socket index
    nic_per_socket = bool(v.get("nic_persocket", 0))

    def component(name: str, s: int, d: int) -> list[Hop]:
        base = "pci" if name.startswith("pci") else name
        if f"{base}_latency" not in v or f"{base}_bandwidth" not in v:
            raise MachineError(f"{source}: a path uses {name} but {base}_latency / "
                               f"{base}_bandwidth are not given")
        latency, bandwidth = float(v[f"{base}_latency"]), float(v[f"{base}_bandwidth"])
        bandwidth *= FLEXFLOW_GB
        if name in ("upi", "nic"):
            src = socket_of[s] if name == "upi" or nic_per_socket else s // per_node
            dst = socket_of[d] if name == "upi" or nic_per_socket else d // per_node
            return [Hop((f"{name}-out{src}",), latency / 2, bandwidth * 2),
                    Hop((f"{name}-in{dst}",), latency / 2, bandwidth * 2)]
        resource = {"membus": f"membus{socket_of[s]}", "pci_to_host": f"pci-to-host{s}",
                    "pci_to_dev": f"pci-to-dev{d}", "nvlink": f"nvlink{s}-{d}"}[name]
        return [Hop((resource,), latency, bandwidth)]

    def path(key: str, s: int, d: int) -> Route:
        if key not in v:
            raise MachineError(f"{source}: {key} is needed for {nodes} node(s) x {sockets} "
                               f"socket(s) x {gpus} GPU(s) but is not given")
        return tuple(h for name in v[key] for h in component(name, s, d))

    def link(s, d, sn, dn):
        scope = ("inter_node" if sn != dn else
                 "intra_socket" if socket_of[s] == socket_of[d] else "inter_socket")
        return path(f"{scope}_gpu_fb_mem_to_gpu_fb_mem", s, d)

    def host(d, node):
        key = "intra_socket_sys_mem_to_gpu_fb_mem"
        return path(key, d, d) if key in v else component("pci_to_dev", d, d)

    overheads = Overheads(float(ext["task_overhead"]), float(ext["action_overhead"]),
                          float(ext["hop_latency"]), float(ext["iteration_overhead"]),
                          scheduler=float(ext["scheduler_overhead"]))
    machine = cluster(Path(source).name, kind, nodes, per_node, link, host, overheads)
    machine.check(source)
    return machine


def read(path: str, gpu_memory: int | None = None) -> MachineModel:
    """A machine file: our JSON form (starts with `{`) or FlexFlow's `key = value` text."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise MachineError(f"cannot read machine model file {path}: {error}") from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as error:  # bad syntax, huge numbers, deep nesting
            raise MachineError(f"{path}: not valid JSON ({type(error).__name__}: "
                               f"{str(error)[:200]})") from None
        if not isinstance(data, dict):
            raise MachineError(f"{path}: expected a JSON object")
        return MachineModel.from_json(data, path)
    return from_flexflow(text, path, gpu_memory)


def with_memory(machine: MachineModel, memory: int) -> MachineModel:
    """The same machine with every device kind given `memory` bytes (`-ll:fsize`)."""
    kinds = {name: replace(kind, memory=memory) for name, kind in machine.kinds.items()}
    return replace(machine, kinds=kinds)
