"""Calibration on a shared host: kernels are timed against a reference timed next to them;
cached scheduler overheads follow the scheduler's pace now; the cores devices get are kept with
the overheads fitted with them."""

import pytest

from flexflow.scheduler import calibration as C
from flexflow.scheduler.calibration import cache, fit, machines, measure, probes, timing


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv(C.CACHE_ENV, str(tmp_path))
    return C.LocalRunner(2, cpu_only=True)


def test_cached_overheads_scale_with_the_scheduler_pace(runner, monkeypatch):
    first = C.calibrate(runner, [], stream=open("/dev/null", "w")).machine
    cached = cache.load(next(C.cache_dir().glob("cluster-*.json")))
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
            if host["runs"] > 4:  # warm-up, reference, untimed and timed kernel runs
                host["slowness"] = 3.0
            time.sleep(ms * host["slowness"] / 1e3)
            return "result"
        return run
    ratio, result = timing._median_ratio(run_for(8.0), run_for(4.0), lambda: None)
    assert result == "result"
    assert ratio == pytest.approx(2.0, rel=0.15)


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
    measured = cache.load(next(C.cache_dir().glob("cluster-*.json")))["model_probe_ms"]
    assert measured > 0
    assert ModelProbe(2).simulated_ms(machine) == pytest.approx(measured, rel=0.01)
