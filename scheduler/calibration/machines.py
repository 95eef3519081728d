"""Machine models built from what calibration measured: the calibrated machine, and the
machine of probe devices the overheads are fitted on."""

from __future__ import annotations

import os

from ..machine import GB, Collectives, DeviceKind, Hop, MachineModel, Overheads, RingProtocol

LOCAL_BANDWIDTH = 1e12   # bytes per ms: in-process "transfers" pass references


def worker_routes(devices: int, latency: float, bandwidth: float) -> dict:
    """Routes between worker processes: the fetch latency (a round trip, holding nothing), then
    the bytes through the sender's and the receiver's transfer resources at once, so that the
    transfers out of one worker, or into one, share its bandwidth (a worker's event loop moves
    them all)."""
    return {(s, d): (Hop((), latency, LOCAL_BANDWIDTH), Hop((f"send{s}", f"recv{d}"), 0.0,
                                                             bandwidth))
            for s in range(devices) for d in range(devices) if s != d}


def probe_machine(devices: int, cores: float | None, overheads: Overheads, fetch: float,
                  bandwidth: float) -> MachineModel:
    """Devices whose kernels take no time, with the given overheads and links: what the probe
    graphs' times are simulated on."""
    kind = DeviceKind("probe", 1 << 40, 1e12, 1e12)
    routes = worker_routes(devices, fetch, bandwidth)
    host = tuple((Hop(("client",), 0.0, LOCAL_BANDWIDTH),) for _ in range(devices))
    return MachineModel({"probe": kind}, ("probe",) * devices, (0,) * devices, routes, host,
                        overheads, cores)


def calibrated_machine(runner, tables, cluster: dict, memory: int | None,
                       drift: float) -> MachineModel:
    """The runner's devices with the kernel `tables` (kernels.KernelTables) and the `cluster`
    measurement, its overheads and link latency scaled by `drift`; each device's memory is
    `memory`, else the worker's limit, else the host's, less what its kind's kernels keep
    allocated between calls (the memory model counts the arrays alone)."""
    names = tables.names
    limits = runner.memory()
    device_memory = [memory or limit or _host_memory() for limit in limits]
    hosts = runner.hosts()
    nodes = tuple(sorted(set(hosts)).index(h) for h in hosts)
    device_kinds = {}
    for name in names:
        flops, bandwidth = tables.kinds[name]
        capacity = min(m for m, n in zip(device_memory, names) if n == name)
        device_kinds[name] = DeviceKind(name, max(0, capacity - tables.kept.get(name, 0)),
                                        flops * 1e6, bandwidth * GB)
    link, host = cluster["link"], cluster["host"]
    routes = worker_routes(runner.num_devices, link["latency_ms"] * drift,
                           link["bandwidth_gbs"] * GB)
    host_routes = tuple((Hop(("client",), host["latency_ms"], host["bandwidth_gbs"] * GB),)
                        for _ in range(runner.num_devices))
    overheads = Overheads(**{k: v * drift for k, v in cluster["overheads_ms"].items()})
    return MachineModel(device_kinds, tuple(names), nodes, routes, host_routes, overheads,
                        cluster["cores"], tables.costs, tables.partials, name="calibrated",
                        collectives=measured_collectives(cluster["collectives"], drift))


def measured_collectives(ring: dict | None, drift: float) -> Collectives:
    """The collectives as calibration timed them on the cluster's process groups (one
    protocol: gloo's ring), their latencies scaled by `drift` as the overheads are; NCCL's
    figures where they were not timed."""
    if ring is None:
        return Collectives()
    step = ring["step"] * drift
    return Collectives((RingProtocol(ring["base"] * drift, step, step),),
                       ring["bandwidth_gbs"] * GB)


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30
