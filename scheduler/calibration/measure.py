"""Measuring a cluster: the executor's overheads, the links and the cores devices really get.

The probe graphs (probes.py), raw Dask task chains, submissions and a tiny real model's
iteration (model_probe.py) are timed round-robin; the overheads are those with which the
simulator reproduces the probes' times best (fit.py), completed by what they leave out of the
real iteration. The result is cached per cluster shape and reused with the overheads scaled by
the scheduler's pace now.
"""

from __future__ import annotations

import os
import pickle
import statistics
import time
from dataclasses import dataclass, fields, replace
from functools import partial

from .. import actions as A
from ..executor import run_group
from ..fusion import fuse
from ..machine import GB, MAX_DEVICES, MAX_MS, MIN_RATE, Overheads
from ..model_probe import ModelProbe
from .cache import (CACHE_FORMAT, CLUSTER_FORMAT, MIN_TIMED_MS, Check, cache_dir, digest, exactly,
                    load, number, optional, record, store)
from .fit import fit_overheads, theil_sen
from .machines import LOCAL_BANDWIDTH, probe_machine
from .probes import action_graph, interleaved_ms, probe_graph, ring_graph, star_graph
from .runners import CollectiveTimes, DaskRunner, LocalRunner
from .timing import reference_span_at

PROBE_BYTES = 4 << 20
LINK_BYTES = 32 << 20  # with PROBE_BYTES: two transfer sizes, whose difference gives bandwidth
CHAIN = (1, 2, 4, 6, 9)  # lengths of the dependent-hop probes (long ones: real iterations are)
RAW_CHAIN = (1, 2, 4, 8)  # lengths of the raw Dask chains that give the fetch latency
STAR = (1, 2, 3)  # rounds of the gather-then-spread probes
PROBE_RUNS = 15  # rounds of the scheduler and link probes (a shared host is noisy)
PACE_CHAIN, PACE_RUNS = 4, 9  # the chain (one of CHAIN) and its runs timed at every calibration
WIDE = 200  # actions in the probe of per-action overhead
TOGETHER_LEAD_S = 0.3  # how far ahead devices timing the reference kernel together are started
CORES_ROUNDS = 11  # pairs of an alone and a together run that give the effective cores
COLLECTIVE_BYTES = (4, 8 << 20)  # the collectives timed: their latency, and their bandwidth


def _pair(devices: int) -> tuple[int, ...]:
    """The devices a chain probe visits in turn."""
    return (0, 1) if devices > 1 else (0,)


def group_overhead_ms(group) -> float:
    """Deserialising and running a fused task of no-op actions: the worker's share of a task."""
    blob = pickle.dumps(group)
    ctx = A.Context(None)
    start = time.perf_counter()
    for _ in range(20):
        run_group(ctx, None, pickle.loads(blob))
    return (time.perf_counter() - start) * 1e3 / 20


def scheduler_pace_ms(runner) -> float:
    """Median time of a short chain of probe tasks across two devices: how fast the scheduler
    and the workers' event loops turn tasks around now. Overheads measured earlier are scaled
    by it (a shared host's load changes; a kernel's speed does not say how this changes)."""
    graph = probe_graph(_pair(runner.num_devices), PACE_CHAIN)
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
    `CORES_ROUNDS`, so that the host's drift between runs stays out of the ratio. It is
    measured once per cluster and every prediction's kernels are shared out by it. In this
    process, devices run one after the other: 1."""
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


def _fitted_shapes(devices: int, remote: bool) -> dict:
    """The probe graphs the overheads are fitted to: chains, and on a cluster rings, stars
    and (past two devices) rings where each group receives from every other device."""
    shapes = {("chain", k): probe_graph(_pair(devices), k) for k in CHAIN}
    if remote:
        shapes.update({("ring", k): ring_graph(devices, k) for k in CHAIN})
        shapes.update({("star", k): star_graph(devices, k) for k in STAR})
        if devices > 2:
            shapes.update({("all", k): ring_graph(devices, k, devices - 1) for k in CHAIN})
    return shapes


def _dask_probes(runner) -> dict:
    """Probes that bypass the executor: raw Dask task chains on one and on two workers (the
    fetch latency), and submissions of two array sizes (the client's bandwidth)."""
    probes = {}
    for k in RAW_CHAIN:
        probes[("same", k)] = partial(runner.raw_chain_ms, (0,), k)
        probes[("cross", k)] = partial(runner.raw_chain_ms, _pair(runner.num_devices), k)
    probes["submit"] = partial(runner.submit_ms, 0, 1)
    probes["submit large"] = partial(runner.submit_ms, 0, PROBE_BYTES)
    return probes


@dataclass
class _Timings:
    """The probe graphs the overheads are fitted to, every probe's median ms, and the model
    probe timed among them (None in this process)."""

    devices: int
    shapes: dict
    ms: dict
    model: ModelProbe | None


def _time_probes(runner, remote: bool) -> _Timings:
    """Every probe timed round-robin: the fitted graphs, the wide group, and on a cluster the
    links, the model probe and the raw Dask probes."""
    n = runner.num_devices
    shapes = _fitted_shapes(n, remote)
    wide_graph, wide = action_graph(WIDE)
    graphs = dict(shapes, wide=wide)
    if remote:
        graphs["link"] = probe_graph(_pair(n), 2, nbytes=PROBE_BYTES)
        graphs["link large"] = probe_graph(_pair(n), 2, nbytes=LINK_BYTES)
    executors = {name: runner.executor(graph, A.Context(wide_graph if name == "wide" else None))
                 for name, graph in graphs.items()}
    probes = {name: partial(executor.run, *graphs[name].phases)
              for name, executor in executors.items()}
    model = None
    try:
        if remote:
            model = ModelProbe(n)
            executors["model"] = runner.executor(model.taskgraph, model.context())
            model.start(executors["model"])
            probes["model"] = partial(model.step, executors["model"])
            probes.update(_dask_probes(runner))
        return _Timings(n, shapes, interleaved_ms(probes, PROBE_RUNS), model)
    finally:
        for executor in executors.values():
            executor.close()


def _chain_overheads(ms: dict) -> tuple[Overheads, float]:
    """(overheads read off the chains and the wide group, the chains' ms per level): all there
    is in this process, and where the fit starts on a cluster."""
    per_level, intercept = theil_sen(CHAIN, [ms[("chain", k)] for k in CHAIN])
    action = max(0.0, (ms["wide"] - ms[("chain", 1)]) / WIDE)
    task = group_overhead_ms(fuse(probe_graph((0,), 1).tasks)[0])
    hop = max(0.0, per_level - task - action)
    return Overheads(task=task, action=action, hop=hop, iteration=intercept), per_level


def _bandwidths(ms: dict) -> tuple[float, float]:
    """(between workers, from the client to a worker) bytes per ms, from two transfer sizes."""
    link = (LINK_BYTES - PROBE_BYTES) / max(ms["link large"] - ms["link"], 1e-3)
    host = PROBE_BYTES / max(ms["submit large"] - ms["submit"], 1e-3)
    return link, host


def _fit_start(ms: dict, chain: Overheads, per_level: float, devices: int) -> tuple:
    """Where the fit starts: the fetch latency from the raw chains (across workers less within
    one), and what makes a ring's level (a group on every device) dearer than a chain's (one
    group) put down to the scheduler; the fit settles how they share the hop."""
    same = theil_sen(RAW_CHAIN, [ms[("same", k)] for k in RAW_CHAIN])[0]
    cross = theil_sen(RAW_CHAIN, [ms[("cross", k)] for k in RAW_CHAIN])[0]
    fetch = max(0.0, min(cross - same, chain.hop))
    ring = theil_sen(CHAIN, [ms[("ring", k)] for k in CHAIN])[0]
    scheduler = min(max(0.0, (ring - per_level) / (devices - 1)), chain.hop - fetch)
    return (chain.task, chain.hop - fetch - scheduler, 0.0, max(chain.iteration, 0.0), fetch,
            scheduler)


def _fitted_overheads(timings: _Timings, chain: Overheads, per_level: float,
                      cores: float | None, bandwidth: float) -> tuple[Overheads, float]:
    """(overheads, fetch latency) with which the simulator reproduces the probes' times, from
    the `chain` estimates; what they leave out of the real model's iteration goes to the
    per-iteration overhead."""
    ms, devices = timings.ms, timings.devices
    task, hop, receive, iteration, fetch, scheduler = fit_overheads(
        timings.shapes, ms, devices, cores, chain.action, bandwidth,
        _fit_start(ms, chain, per_level, devices))
    overheads = Overheads(task, chain.action, hop, iteration, receive, scheduler)
    fitted = probe_machine(devices, cores, overheads, fetch, bandwidth)
    gap = ms["model"] - timings.model.simulated_ms(fitted)
    return replace(overheads, iteration=iteration + gap), fetch


def collectives_fit(times: CollectiveTimes | None, devices: int) -> dict | None:
    """The ring model of the collectives (`machine.Collectives`) from the times of a sum of the
    two COLLECTIVE_BYTES sizes over `devices` and of a small one amid work: the slope in bytes
    gives the bandwidth (a sum moves 2(n-1)/n of its bytes over each link), and the latency is
    the small one's time less its bytes', or its time amid work where that is longer (an
    iteration's sums follow work), put in the 2(n-1) steps (so that a sum over fewer devices
    takes fewer); None when they were not timed."""
    if times is None or devices < 2:
        return None
    ms = times.idle
    small, large = COLLECTIVE_BYTES
    share = 2 * (devices - 1) / devices
    bandwidth = max(share * (large - small) / max(ms[large] - ms[small], 1e-6), MIN_RATE)
    latency = max(ms[small] - share * small / bandwidth, times.amid_work, 0.0)
    return {"base": 0.0, "step": latency / (2 * (devices - 1)), "bandwidth_gbs": bandwidth / GB}


def measure_cluster(runner, stream) -> dict:
    """Overheads (ms), links and effective cores of the runner's devices (one node)."""
    print("Calibrating the scheduler and links ...", file=stream, flush=True)
    n = runner.num_devices
    remote = n > 1 and isinstance(runner, DaskRunner)
    timings = _time_probes(runner, remote)
    ms = timings.ms
    overheads, per_level = _chain_overheads(ms)
    cores = effective_cores(runner)
    cores_per_node = shared_cores(cores, n)
    fetch, bandwidth, host_bandwidth = 0.0, LOCAL_BANDWIDTH, LOCAL_BANDWIDTH
    collectives = None
    if remote:
        bandwidth, host_bandwidth = _bandwidths(ms)
        overheads, fetch = _fitted_overheads(timings, overheads, per_level, cores_per_node,
                                             bandwidth)
        collectives = collectives_fit(runner.collectives_ms(COLLECTIVE_BYTES, PROBE_RUNS), n)
    return {"overheads_ms": {"task": overheads.task, "action": overheads.action,
                             "hop": overheads.hop, "iteration": max(0.0, overheads.iteration),
                             "receive": overheads.receive, "scheduler": overheads.scheduler},
            "model_probe_ms": ms.get("model"),  # the real iteration the overheads reproduce
            "scheduler_ms": ms[("chain", PACE_CHAIN)],  # timed among the probes fitted
            "cores": cores_per_node, "effective_cores": cores,
            "link": {"latency_ms": fetch, "bandwidth_gbs": bandwidth / GB},
            "host": {"latency_ms": 0.0, "bandwidth_gbs": host_bandwidth / GB},
            "collectives": collectives}


def cluster_file(shape: dict) -> Check:
    """What the cache file of cluster `shape` holds (`measure_cluster`'s result and the
    shape): overheads and latencies >= 0 ms, bandwidths and effective cores as the machine
    model bounds them, the scheduler's pace when measured (which the pace now is divided by)."""
    ms, rate = number(0.0, MAX_MS), number(MIN_RATE / GB)
    link = record({"latency_ms": ms, "bandwidth_gbs": rate})
    ring = record({"base": ms, "step": ms, "bandwidth_gbs": rate})
    return record({"overheads_ms": record({f.name: ms for f in fields(Overheads)}),
                   "collectives": optional(ring),
                   "model_probe_ms": number(0.0, MAX_MS, above=True, null=True),
                   "scheduler_ms": number(MIN_TIMED_MS, MAX_MS),
                   "cores": number(1, MAX_DEVICES, null=True),
                   "effective_cores": number(1, MAX_DEVICES), "link": link, "host": link,
                   "shape": exactly(shape)})


def cluster_measurement(runner, kind_keys: list[str], refresh: bool,
                        stream) -> tuple[dict, float]:
    """(the runner's cluster measurement, how much slower the scheduler turns tasks around now
    than when it was measured): read from the cache file of the cluster's shape (its devices'
    kinds, hosts and runner) unless `refresh`, else measured now and stored."""
    hosts = runner.hosts()
    shape = {"kinds": kind_keys, "hosts": [hosts.index(h) for h in hosts],
             "runner": type(runner).__name__, "cache format": CACHE_FORMAT,
             "cluster format": CLUSTER_FORMAT}
    path = cache_dir() / f"cluster-{digest(shape)}.json"
    cluster = {} if refresh else load(path, cluster_file(shape))
    if cluster:  # the host's load now
        return cluster, scheduler_pace_ms(runner) / cluster["scheduler_ms"]
    cluster = measure_cluster(runner, stream)
    store(path, {**cluster, "shape": shape})
    return cluster, 1.0
