"""bench/pipeline_overlap.py at a tiny size on a real 2-worker Dask cluster: every system (one
device, data parallelism, the 2-stage pipeline in 1, 2 and 4 micro-batches on the workers and
serially in this process) trains, times every measured step and gives the one device's losses.
Nothing is asserted on the times: the host is shared and noisy."""

import pytest

from . import bench_fixture

ROUNDS, STEPS = 2, 2


bench = bench_fixture("pipeline_overlap")


@pytest.fixture(scope="module")
def measured(bench):
    """(the systems, the lines each round reported) of a tiny run."""
    lines = []
    size = bench.Size(batch=8, features=6, width=16, layers=4, classes=3)
    found = bench.measure(size, ROUNDS, STEPS, warmup=1, micro=[2, 4], report=lines.append)
    return found, lines


def test_every_system_ran(bench, measured):
    found, _ = measured
    assert set(found) == {"one device", "data parallel"} | {
        f"pipeline x{m}{serial}" for m in (1, 2, 4) for serial in ("", " serial")}


def test_every_system_timed_every_measured_step(measured):
    found, _ = measured
    for name, system in found.items():
        assert len(system.seconds) == len(system.losses) == ROUNDS * STEPS, name
        assert all(s > 0 for s in system.seconds), name


def test_the_pipelines_ran_micro_batches_on_the_workers(measured):
    """The case: x2 and x4 run each micro-batch's forwards and backwards in lanes of their own
    (GPipe's order: 2M lanes); x1 has only lane 0."""
    found, _ = measured
    for micro, lanes in ((1, 1), (2, 4), (4, 8)):
        ff = found[f"pipeline x{micro}"].ff
        assert ff.compiled.cluster is not None
        assert len({t.lane for t in ff.compiled.executor.taskgraph.tasks}) == lanes


def test_every_system_gives_the_one_devices_losses(bench, measured):
    found, _ = measured
    gaps = bench.worst_loss_gap(found)
    assert max(gaps.values()) <= bench.LOSS_TOLERANCE, gaps
    assert all(loss > 0 for loss in found["one device"].losses)


def test_the_report_has_a_line_a_round_and_a_row_a_system(bench, measured):
    found, lines = measured
    assert len(lines) == ROUNDS and all(line.startswith("round ") for line in lines)
    table = bench.summary(found)
    assert len(table) == len(found) + 2 and "within" in table[-1] and "NOT" not in table[-1]
    for name, row in zip(found, table[1:]):
        assert row.startswith(name)
