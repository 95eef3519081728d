"""bench/paper_scaling.py prints what it says: one well-formed table per preset, whose rows are
the simulator's data parallelism on the first n devices of the preset at a per-device batch
that one device holds (so the global batch grows with n), an efficiency of exactly 1 on one
device, and device counts the preset lacks skipped."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture
def paper_scaling(monkeypatch):
    """bench/paper_scaling.py as a module, with bench/ importable as the script has it."""
    monkeypatch.syspath_prepend(str(BENCH))
    import paper_scaling
    return paper_scaling


def _simulated_data_parallel(machine, build, batch):
    """An independent oracle: data parallelism of `build` at global `batch` on `machine`, the
    task graph a default run on a cluster with torch runs (collectives, the non-finite guard)."""
    import dnn

    from flexflow.scheduler.simulator import Simulator
    from flexflow.scheduler.strategy import data_parallel_strategy
    from flexflow.scheduler.taskgraph import Checks
    graph, objective = dnn.graph_of(build, batch)
    checks = Checks(finite_gradients=True, collectives=True)
    return Simulator(graph, objective, machine, checks=checks).simulate(
        data_parallel_strategy(graph, machine.num_devices))


def _table(output: str) -> list[list[str]]:
    """The cells of each line of the printed markdown table."""
    return [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in output.splitlines() if line.startswith("|")]


def test_the_table_of_a_tiny_run_is_well_formed(paper_scaling, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["paper_scaling.py", "--models", "alexnet", "--presets",
                                      "h100-8", "--devices", "1", "2", "16", "--budget", "2"])
    paper_scaling.main()
    output = capsys.readouterr().out
    header, rule, *rows = _table(output)
    assert header == list(paper_scaling.COLUMNS)
    assert rule == ["---"] * len(header)
    assert [row[:4] for row in rows] == [["alexnet", "1", "64", "64"],
                                         ["alexnet", "2", "64", "128"]]
    one, two = (dict(zip(header, row)) for row in rows)
    assert float(one["efficiency"]) == 1.0
    assert one["data parallel (ms)"] == one["searched (ms)"]  # one device: nothing to search
    assert float(two["efficiency"]) == pytest.approx(
        float(one["data parallel (ms)"]) / float(two["data parallel (ms)"]), abs=0.01)
    assert float(two["speed-up"].rstrip("x")) == pytest.approx(
        float(two["data parallel (ms)"]) / float(two["searched (ms)"]), abs=0.01)
    assert "16 devices skipped" in output
    assert "alexnet: 64 per device (the paper's)" in output
    assert "load" in output.splitlines()[0] and "load" in output.splitlines()[-1]


def test_rows_are_the_simulators_data_parallelism_at_a_growing_global_batch(paper_scaling):
    import dnn

    from flexflow.scheduler import machine as machine_module
    machine = machine_module.preset("h100-8")
    fitted = paper_scaling.baseline("alexnet", machine)
    one, two = paper_scaling.scaling_rows("alexnet", machine, [1, 2], 2, fitted)
    assert one.efficiency == 1.0
    assert (one.global_batch, two.global_batch) == (64, 128)
    alone = _simulated_data_parallel(paper_scaling.first_devices(machine, 1), dnn.alexnet, 64)
    pair = _simulated_data_parallel(paper_scaling.first_devices(machine, 2), dnn.alexnet, 128)
    assert (one.data_parallel_ms, two.data_parallel_ms) == (alone.time, pair.time)
    assert two.efficiency == alone.time / pair.time
    assert 0 < two.efficiency < 1  # the same work per device, and gradients to exchange


def test_a_model_one_device_cannot_hold_at_64_runs_at_the_largest_power_of_two_it_can(
        paper_scaling):
    import dnn

    from flexflow.scheduler import machine as machine_module
    # K80s of 4 GiB, which hold ResNet-50's data parallelism at 32 per device, not at 64
    machine = machine_module.with_memory(machine_module.preset("k80-16x4"), 4 << 30)
    fitted = paper_scaling.baseline("resnet50", machine)
    per_device, simulation = fitted[0], fitted[4]
    assert per_device < 64 and not simulation.over
    one = paper_scaling.first_devices(machine, 1)
    assert _simulated_data_parallel(one, dnn.resnet50, 2 * per_device).over
    note = paper_scaling.batch_note("resnet50", machine, fitted)
    assert f"resnet50: {per_device} per device, the largest power of two" in note


def test_the_first_devices_of_a_preset_keep_its_nodes_and_links(paper_scaling):
    from flexflow.scheduler import machine as machine_module
    machine = machine_module.preset("p100-4x4")
    part = paper_scaling.first_devices(machine, 6)
    assert part.num_devices == 6 and part.nodes == (0, 0, 0, 0, 1, 1)
    assert set(part.routes) == {(s, d) for s in range(6) for d in range(6) if s != d}
    assert all(part.route(s, d) == machine.route(s, d) for s, d in part.routes)
    assert part.host_routes == machine.host_routes[:6]


def test_a_row_prints_its_figures_and_marks_those_over_memory(paper_scaling):
    row = paper_scaling.Row("alexnet", 2, 64, 128, 30.0, True, 0.5, 12.0, False, 1.5)
    assert row.cells() == ("alexnet", "2", "64", "128", "30.0*", "0.50", "12.0", "2.50x", "1.5")
