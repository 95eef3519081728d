"""Calibration on a shared host: kernels are timed against a reference timed next to them;
cached scheduler overheads follow the scheduler's pace now; the cores devices get are kept with
the overheads fitted with them. The cache is only a cache: a folder that cannot be written, or
a file of the wrong content, costs a warning and a measurement, never the run."""

import errno
import io
import json
import math
import os
import pathlib
import warnings

import pytest

from flexflow.scheduler import calibration as C
from flexflow.scheduler.calibration import (cache, fit, kernels, machines, measure, probes, runners,
                                           timing)
from flexflow.scheduler.costs import KernelCall


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv(C.CACHE_ENV, str(tmp_path))
    return C.LocalRunner(2, cpu_only=True)


def test_cached_overheads_scale_with_the_scheduler_pace(runner, monkeypatch):
    first = C.calibrate(runner, [], stream=open("/dev/null", "w")).machine
    cached = json.loads(next(C.cache_dir().glob("cluster-*.json")).read_text())
    # the host has become three times slower at turning tasks around since the measurement
    monkeypatch.setattr(measure, "scheduler_pace_ms", lambda runner: 3 * cached["scheduler_ms"])
    later = C.calibrate(runner, [], stream=open("/dev/null", "w")).machine
    for name, ms in vars(first.overheads).items():
        assert getattr(later.overheads, name) == pytest.approx(3 * ms), name
    assert later.route(0, 1)[0].latency == pytest.approx(3 * first.route(0, 1)[0].latency)


def test_the_cores_are_measured_with_the_overheads_and_kept_with_them(runner, monkeypatch):
    quiet = open("/dev/null", "w")
    monkeypatch.setattr(measure, "effective_cores", lambda runner: 1.5)
    assert C.calibrate(runner, [], stream=quiet).machine.cores_per_node == 1.5

    def measured_again(runner):
        raise AssertionError("a cached calibration measured the cores again")
    monkeypatch.setattr(measure, "effective_cores", measured_again)
    assert C.calibrate(runner, [], stream=quiet).machine.cores_per_node == 1.5
    monkeypatch.setattr(measure, "effective_cores", lambda runner: 2.0)  # a core for each device
    assert C.calibrate(runner, [], stream=quiet, refresh_cluster=True).machine.cores_per_node \
        is None


def test_a_kernel_is_timed_against_the_reference_run_next_to_it():
    """The host becomes three times slower after the kernel's first timed run: the table still
    gets the kernel's time over the reference's, the ratio of every pair."""
    import time
    host = {"slowness": 1.0, "runs": 0}

    def run_for(ms):
        def run():
            host["runs"] += 1
            if host["runs"] > 5:  # warm-up, reference twice, untimed and timed kernel runs
                host["slowness"] = 3.0
            time.sleep(ms * host["slowness"] / 1e3)
            return "result"
        return run
    ratio, result = timing._median_ratio(run_for(8.0), run_for(4.0), lambda: None)
    assert result == "result"
    assert ratio == pytest.approx(2.0, rel=0.15)


def test_the_reference_is_timed_warm_as_it_is_when_the_table_is_read():
    """A reference run straight after the kernel takes twice as long (the kernel flushed its
    operands from the caches); back to back, as `reference_ms` times it, it takes 4 ms: the
    kernel of 8 ms is stored as twice the reference, not as once."""
    import time
    last = {"ran": None}

    def kernel():
        last["ran"] = "kernel"
        time.sleep(8e-3)

    def reference():
        time.sleep((8e-3 if last["ran"] == "kernel" else 4e-3))
        last["ran"] = "reference"
    ratio, _ = timing._median_ratio(kernel, reference, lambda: None)
    assert ratio == pytest.approx(2.0, rel=0.15)


class _FakeClock:
    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


class _FakeCommunicator:
    """A sum that takes `idle_ms` when every member is there, and `late_ms` more after work
    (the last member arrives late); time runs on `clock`."""

    def __init__(self, clock, idle_ms, late_ms):
        import numpy
        self._xp, self.clock, self.idle_ms, self.late_ms = numpy, clock, idle_ms, late_ms
        self.after_work = False

    def launch(self, key, array, members, gather=False, partials=False):
        self.clock.now += (self.idle_ms + (self.late_ms if self.after_work else 0.0)) / 1e3
        self.after_work = False

    def result(self, key):
        return None


def test_a_sum_amid_work_costs_what_the_last_member_makes_the_others_wait(monkeypatch):
    import time as time_module

    from flexflow.scheduler import process_groups
    clock = _FakeClock()
    monkeypatch.setattr(time_module, "perf_counter", clock.perf_counter)
    communicator = _FakeCommunicator(clock, idle_ms=0.25, late_ms=3.0)

    def make_work():
        def work():
            clock.now += 5e-3
            communicator.after_work = True
        return work
    ms = process_groups.time_amid_work(communicator, (0, 1), make_work, runs=3)
    assert ms == pytest.approx(3.25)


def test_the_collectives_latency_is_the_longer_of_idle_and_amid_work():
    small, large = measure.COLLECTIVE_BYTES
    idle = {small: 0.2, large: 0.2 + large / 1e6}  # 1 GB/s... of the 2(n-1)/n share
    amid = measure.collectives_fit(runners.CollectiveTimes(idle, 3.0), 4)
    assert amid["step"] * 2 * 3 == pytest.approx(3.0)
    quiet = measure.collectives_fit(runners.CollectiveTimes(idle, 0.05), 4)
    assert quiet["step"] * 2 * 3 == pytest.approx(0.2, rel=0.01)
    assert amid["bandwidth_gbs"] == quiet["bandwidth_gbs"]
    assert measure.collectives_fit(None, 4) is None


def test_worker_routes_share_each_workers_bandwidth():
    routes = machines.worker_routes(3, latency=0.5, bandwidth=100.0)
    delay, data = routes[(1, 2)]
    assert delay.resources == () and delay.latency == 0.5  # a round trip holds nothing
    assert data.resources == ("send1", "recv2") and data.bandwidth == 100.0


def test_fitted_overheads_reproduce_the_probes_from_a_poor_start():
    from flexflow.ops.graph import Graph
    from flexflow.scheduler.machine import Overheads
    from flexflow.scheduler.simulator import Simulator

    graphs = {("chain", k): probes.probe_graph((0, 1), k) for k in measure.CHAIN}
    graphs.update({("ring", k): probes.ring_graph(2, k) for k in measure.CHAIN})
    graphs.update({("star", k): probes.star_graph(2, k) for k in measure.STAR})

    def times(task, hop, receive, iteration, fetch, scheduler):
        machine = machines.probe_machine(2, 1.5, Overheads(task, 0.05, hop, iteration, receive,
                                                     scheduler), fetch, 1e6)
        simulator = Simulator(Graph(), None, machine)
        return {name: simulator.simulate_taskgraph(g).time for name, g in graphs.items()}
    measured = times(1.0, 2.0, 0.5, 5.0, 1.0, 1.5)
    fitted = fit.fit_overheads(graphs, measured, 2, 1.5, 0.05, 1e6, (20, 0, 0, 7, 18, 5))
    reproduced = times(*fitted)
    assert [reproduced[n] for n in graphs] == pytest.approx([measured[n] for n in graphs],
                                                            rel=0.02)


def test_the_model_probe_is_a_real_training_iteration():
    """Batches fed, a loss (with its metric sums) on every device, weights that learn."""
    from flexflow.scheduler.model_probe import ModelProbe

    probe = ModelProbe(2)
    executor = C.LocalRunner(2, cpu_only=True).executor(probe.taskgraph, probe.context())
    probe.start(executor)
    before = executor.get_weights({(0, 0): (4, 4)})[(0, 0)].copy()
    records = probe.step(executor)
    assert [sorted(r) for r in records] == [["loss", "samples"]] * 2  # one per device
    assert [r["samples"] for r in records] == [2, 2]
    assert not (executor.get_weights({(0, 0): (4, 4)})[(0, 0)] == before).all()


def test_the_calibrated_machine_reproduces_the_real_model_probe(tmp_path, monkeypatch):
    """On a real cluster the probes' fitted overheads are completed by the real iteration's
    gap: the machine model simulates the model probe's iteration as it was measured."""
    from flexflow.scheduler import cluster as cluster_module
    from flexflow.scheduler.model_probe import ModelProbe
    from tests.parallel.cluster import loopback_cluster

    monkeypatch.setenv(C.CACHE_ENV, str(tmp_path))
    with loopback_cluster(workers=2) as address:
        try:
            cluster = cluster_module.connect(address, 2, stream=open("/dev/null", "w"))
            runner = C.DaskRunner(cluster.client, cluster.workers, cpu_only=True)
            machine = C.calibrate(runner, [], stream=open("/dev/null", "w")).machine
        finally:
            cluster_module.disconnect(address)
    measured = json.loads(next(C.cache_dir().glob("cluster-*.json")).read_text())[
        "model_probe_ms"]
    assert measured > 0
    assert ModelProbe(2).simulated_ms(machine) == pytest.approx(measured, rel=0.01)


# ---- the cache: folders that cannot be written, files of the wrong content ----------------------
CALLS = [KernelCall("check|isfinite|(8,)", "check", None, ((8,),), 2.0, 32.0),
         KernelCall("sum|add|(8,)", "sum", None, ((8,),), 2.0, 96.0)]


def calibrated(monkeypatch):
    """A real calibration of two in-process devices for CALLS (the reference kernel timed once:
    quicker), the times the cluster was measured, and the CacheWarnings' messages."""
    monkeypatch.setattr(kernels, "TIMING_ROUNDS", 1)
    measured = []
    measure_cluster = measure.measure_cluster
    monkeypatch.setattr(measure, "measure_cluster",
                        lambda *args: measured.append(1) or measure_cluster(*args))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = C.calibrate(C.LocalRunner(2, cpu_only=True), CALLS, stream=io.StringIO())
    return result, len(measured), [str(w.message) for w in caught
                                   if issubclass(w.category, cache.CacheWarning)]


def assert_sane(machine):
    """Every cost the search reads is a finite number, >= 0 (kernel times and rates > 0), and
    an iteration simulated on the machine takes a finite, positive time."""
    from flexflow.ops.graph import Graph
    from flexflow.scheduler.simulator import Simulator

    def finite(value, low=0.0):
        return isinstance(value, float) and math.isfinite(value) and value >= low
    assert all(finite(ms) and ms > 0 for table in machine.costs.values() for ms in table.values())
    assert all(finite(ms) for ms in vars(machine.overheads).values()), machine.overheads
    assert all(finite(k.peak_flops) and finite(k.mem_bandwidth, 1.0)
               for k in machine.kinds.values())
    for route in [*machine.routes.values(), *machine.host_routes]:
        assert all(finite(hop.latency) and finite(hop.bandwidth, 1.0) for hop in route)
    assert machine.cores_per_node is None or finite(float(machine.cores_per_node), 1.0)
    simulated = Simulator(Graph(), None, machine).simulate_taskgraph(
        probes.probe_graph((0, 1), 4)).time
    assert finite(simulated) and simulated > 0


@pytest.mark.parametrize("unwritable", ["under a file", "read-only folder", "disk full"])
def test_a_cache_folder_that_cannot_be_written_warns_once_and_the_run_goes_on(
        unwritable, tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    if unwritable == "under a file":
        (tmp_path / "a file").write_text("")
        folder = tmp_path / "a file" / "cache"
    elif unwritable == "read-only folder":
        folder.mkdir(mode=0o500)
        if os.access(folder, os.W_OK):
            pytest.skip("this process writes into read-only folders (root)")
    else:
        def full(path, text):
            with open(path, "w") as f:
                f.write(text[:10])
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        monkeypatch.setattr(pathlib.Path, "write_text", full)
    monkeypatch.setenv(C.CACHE_ENV, str(folder))
    result, _, warned = calibrated(monkeypatch)
    assert result.measured == len(CALLS)
    assert_sane(result.machine)
    assert len(warned) == 1, warned  # two files (the kind's, the cluster's): one warning
    assert f"calibration cache folder {folder} cannot be written" in warned[0]
    error = {"under a file": "Not a directory", "read-only folder": "Permission denied",
             "disk full": "No space left on device"}[unwritable]
    assert error in warned[0]
    assert not list(tmp_path.rglob("*.tmp"))  # no partial file left behind


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """The cache files a real calibration wrote: {"kind" or "cluster": (name, contents)}."""
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(C.CACHE_ENV, str(folder))
        calibrated(patch)
    return {path.name.split("-")[0]: (path.name, json.loads(path.read_text()))
            for path in folder.glob("*.json")}


def edit(change):
    """A corruption: `change` applied to a copy of the file's contents, as JSON text."""
    def corrupt(data):
        data = json.loads(json.dumps(data))
        return json.dumps(change(data) or data)
    return corrupt


def kernel(value):
    return edit(lambda d: d["kernels"].update({next(iter(d["kernels"])): value}))


def key(*path, value=None, drop=False):
    """A corruption setting (or, with `drop`, deleting) the entry at `path`."""
    def change(data):
        holder = data
        for name in path[:-1]:
            holder = holder[name]
        if drop:
            del holder[path[-1]]
        else:
            holder[path[-1]] = value
    return edit(change)


CORRUPT = {  # name: (file, corruption, what the warning says)
    "kernel time a string": ("kind", kernel("fast"), "is 'fast', expected a number above 0"),
    "kernel time zero": ("kind", kernel(0), "is 0, expected a number above 0"),
    "kernel time negative": ("kind", kernel(-0.5), "is -0.5, expected a number above 0"),
    "kernel time NaN": ("kind", kernel(math.nan), "is nan, expected"),
    "kernel time infinite": ("kind", kernel(math.inf), "is inf, expected"),
    "kernel time of 400 digits": ("kind", kernel(10 ** 400), "is 1000000"),
    "kernel time nested": ("kind", kernel([0.001]), "is [0.001], expected a number"),
    "kernels a list": ("kind", key("kernels", value=[0.001]), "kernels is [0.001], expected "
                                                               "an object"),
    "partial bytes a fraction": ("kind", key("partial_bytes", "x", value=1.5),
                                 "partial_bytes['x'] is 1.5, expected a whole number"),
    "reference time zero": ("kind", key("speed_reference_ms", value=0),
                            "speed_reference_ms is 0, expected a number from 1e-06"),
    "bandwidth negative": ("kind", key("memory_bandwidth_gbs", value=-14.0),
                           "memory_bandwidth_gbs is -14.0"),
    "peak missing": ("kind", key("peak_gflops", drop=True), "top level has keys"),
    "another kind's fingerprint": ("kind", key("fingerprint", "cpu", value="other"),
                                   "fingerprint is"),
    "kind file a list": ("kind", edit(lambda d: [d]), "top level is [{"),
    "overhead negative": ("cluster", key("overheads_ms", "hop", value=-1e6),
                          "overheads_ms.hop is -1000000.0, expected a number from 0"),
    "overhead a string": ("cluster", key("overheads_ms", "task", value="1 ms"),
                          "overheads_ms.task is '1 ms'"),
    "overhead NaN": ("cluster", key("overheads_ms", "iteration", value=math.nan),
                     "overheads_ms.iteration is nan"),
    "overheads of another key": ("cluster", key("overheads_ms", "lunch", value=1.0),
                                 "overheads_ms has keys"),
    "overheads missing a key": ("cluster", key("overheads_ms", "receive", drop=True),
                                "overheads_ms has keys"),
    "overheads null": ("cluster", key("overheads_ms", value=None),
                       "overheads_ms is None, expected an object"),
    "scheduler pace zero": ("cluster", key("scheduler_ms", value=0), "scheduler_ms is 0"),
    "scheduler pace tiny": ("cluster", key("scheduler_ms", value=1e-300),
                            "scheduler_ms is 1e-300"),
    "cores negative": ("cluster", key("cores", value=-2), "cores is -2, expected a number from "
                                                          "1 to 1024 or null"),
    "link bandwidth zero": ("cluster", key("link", "bandwidth_gbs", value=0),
                            "link.bandwidth_gbs is 0"),
    "link latency negative": ("cluster", key("link", "latency_ms", value=-5.0),
                              "link.latency_ms is -5.0"),
    "link without latency": ("cluster", key("link", "latency_ms", drop=True), "link has keys"),
    "host a list": ("cluster", key("host", value=[0.0, 1e6]), "host is [0.0, 1000000.0]"),
    "another cluster's shape": ("cluster", key("shape", "runner", value="DaskRunner"),
                                "shape is"),
    "truncated": ("cluster", lambda d: json.dumps(d)[:40], "JSONDecodeError"),
    "nested 100000 deep": ("cluster", lambda d: "[" * 100000 + "]" * 100000, "RecursionError"),
    "not UTF-8": ("kind", lambda d: b"\x80{}", "UnicodeDecodeError"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_a_cache_file_of_the_wrong_content_is_measured_again_and_overwritten(
        case, pristine, tmp_path, monkeypatch):
    """Valid JSON of the wrong types or values (or no JSON): a warning naming the file and what
    is wrong, that file measured again (the other one still read) and overwritten, and costs
    that are sane: never an exception, never a negative cost."""
    which, corrupt, said = CORRUPT[case]
    for name, data in pristine.values():
        (tmp_path / name).write_text(json.dumps(data))
    name, data = pristine[which]
    bad = corrupt(data)
    (tmp_path / name).write_bytes(bad if isinstance(bad, bytes) else bad.encode())
    monkeypatch.setenv(C.CACHE_ENV, str(tmp_path))
    result, cluster_measured, warned = calibrated(monkeypatch)
    assert len(warned) == 1 and f"calibration cache file {tmp_path / name} ignored" in warned[0]
    assert said in warned[0], warned[0]
    assert (result.measured, cluster_measured) == ((len(CALLS), 0) if which == "kind" else
                                                   (0, 1))
    assert_sane(result.machine)
    check = (kernels.kind_file(pristine["kind"][1]["fingerprint"]) if which == "kind" else
             measure.cluster_file(pristine["cluster"][1]["shape"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.load(tmp_path / name, check)  # overwritten with what was measured


def test_what_kernels_keep_between_calls_is_recorded_and_taken_off_the_memory(
        runner, monkeypatch):
    """A kernel whose library keeps 8 MiB after its first call (as MKL keeps its packing
    buffers where PyTorch loaded before flexflow-dask): the kernel table records it, and each
    device may hold that much less for the model's arrays."""
    import numpy
    kept = []

    def keeping(xp, rng, call):
        def run():
            if not kept:
                kept.append(numpy.ones(8 << 18, numpy.float32))
        return run
    monkeypatch.setattr(kernels, "TIMING_ROUNDS", 1)
    monkeypatch.setattr(timing, "_kernel", keeping)
    out = io.StringIO()
    machine = C.calibrate(runner, CALLS[:1], memory=1 << 30, stream=out).machine
    assert "kernels keep up to 8.0 MiB allocated between calls" in out.getvalue()
    [kind] = machine.kinds.values()
    assert kind.memory == pytest.approx((1 << 30) - (8 << 20), abs=1 << 20)
    cached = json.loads(next(C.cache_dir().glob("kind-*.json")).read_text())
    assert cached["kept_bytes"][CALLS[0].key] >= 8 << 20
    again = C.calibrate(runner, CALLS[:1], memory=1 << 30, stream=io.StringIO()).machine
    assert [k.memory for k in again.kinds.values()] == [kind.memory]  # from the cache
