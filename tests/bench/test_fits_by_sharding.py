"""bench/fits_by_sharding.py at its test size: on 2 real Dask workers capped below what data
parallelism needs, data parallelism is refused by name, and the search with weight sharding and
recomputation enabled returns a strategy that fits, trains like one device and allocates less
than the cap on each worker."""

import pytest

from . import bench_fixture

pytest.importorskip("torch")  # the collectives (torch.distributed) carry the gradients
MiB = 1 << 20


bench = bench_fixture("fits_by_sharding")


@pytest.fixture(scope="module")
def figures(bench):
    return bench.measure(bench.SIZES["test"], budget=50, steps=3)


def test_the_model_puts_the_cap_between_data_parallelism_and_sharded_weights(bench):
    """The memory model must count a sharded box as its shard: DP is over the cap, DP with
    every weighted layer sharded under the plan's limit."""
    size = bench.SIZES["test"]
    assert min(bench.predicted_peaks(size, sharded=False)) > size.cap_mib * MiB
    assert max(bench.predicted_peaks(size, sharded=True)) < size.limit_mib * MiB


def test_sharding_saves_what_a_hand_count_says(bench):
    """On 2 holders with Adam and the collectives on, a box of W bytes costs data parallelism
    W of weights, 2W of Adam's state and W in the all-reduce bucket per holder; sharded, W/2
    of weights, W of state, W/2 of gradient pieces sent in, and one whole box while its layer
    runs. The model must save at least 2W less the largest box over all the boxes."""
    import numpy as np
    size = bench.SIZES["test"]
    graph, _ = bench.dnn.graph_of(lambda ff, batch: size.build(ff), size.batch)
    boxes = [int(np.prod(w.spec.shape)) * 4 for layer in graph.layers for w in layer.weights
             if w.trainable]
    assert sum(boxes) == bench.model_bytes(size)
    saved = max(bench.predicted_peaks(size, sharded=False)) - max(
        bench.predicted_peaks(size, sharded=True))
    assert saved >= 2 * sum(boxes) - max(boxes)


def test_data_parallelism_is_refused_naming_both_workers(bench, figures):
    refusal = figures["refusal"]
    assert "data parallelism does not fit in device memory" in refusal
    assert "device 0 needs" in refusal and "device 1 needs" in refusal


def test_the_search_returns_a_strategy_that_saves_memory_and_fits(bench, figures):
    """Sharded weights, recomputed layers or both (at this size the search may meet the limit
    by recomputation alone: its selective candidate)."""
    size = bench.SIZES["test"]
    searched = figures["searched"]
    sharded, recomputed = searched["layers"]
    assert sharded or recomputed, "the search saved no memory"
    assert not sharded or "sharded weights" in searched["printed"]
    assert max(searched["predicted"]) <= size.limit_mib * MiB


def test_each_worker_allocates_less_than_the_cap(bench, figures):
    size = bench.SIZES["test"]
    allocated = figures["searched"]["allocated"]
    assert len(allocated) == 2 and all(0 < peak < size.cap_mib * MiB for peak in allocated)


def test_the_capped_run_trains_like_one_device(bench, figures):
    from tests.parallel.test_strategy_invariance import assert_same_run
    run, single = figures["searched"]["run"], figures["single"][0]
    assert len(run.losses) == 3 and single.losses[-1] < single.losses[0]
    assert_same_run(run, single)
