"""The collective path (`--collectives on`, scheduler/collectives.py) in this process: every
strategy of the invariance tests gives the single device's numbers with replicated weights'
gradients summed in buckets and batch norm's statistics summed; the task graph is DDP's (one
group per device through backward, buckets launched in the order backward completes them and
awaited after it, every holder updating whole), and the bucket size decides the buckets."""

import numpy as np
import pytest

from flexflow.core import ActiMode, DataType
from flexflow.model import TRAIN_STEP
from flexflow.scheduler import actions as A
from flexflow.scheduler import collectives
from flexflow.scheduler.strategy import ParallelConfig, data_parallel_strategy

from .models import BATCH, CASES, MODELS, classify, mlp
from .test_strategy_invariance import assert_same_run, compiled, reference, train

COLLECTIVES = ["--collectives", "on"]


@pytest.mark.parametrize("name, kind, n", CASES)
def test_strategy_on_the_collective_path_gives_single_device_numbers(name, kind, n):
    run = train(MODELS[name], ["-ll:gpu", str(n), "--in-process", *COLLECTIVES], kind, n)
    assert_same_run(run, reference(name))


def actions_of(ff, kind):
    return [t for t in ff.compiled.executor.taskgraph.tasks if isinstance(t.action, kind)]


def test_data_parallelism_sums_buckets_and_updates_on_every_holder():
    ff, _ = compiled(mlp, ["-ll:gpu", "2", "--in-process", *COLLECTIVES], "sample", 2)
    graph = ff.compiled.executor.taskgraph
    assert graph.replicated == {k for k, d in graph.weight_devices.items() if len(d) == 2}
    assert not actions_of(ff, A.SendWeightGrad) and not actions_of(ff, A.SendWeight)
    updates = actions_of(ff, A.Update)
    assert sorted((t.device, t.action.key) for t in updates) == sorted(
        (d, key) for key in graph.replicated for d in (0, 1))
    assert all(t.action.shard == t.action.key[2] for t in updates)  # whole boxes
    groups = ff.compiled.executor.groups(TRAIN_STEP)
    assert [g.device for g in groups] == [0, 1, 0, 1]  # backward, then the sums' awaits
    awaiting = groups[2]
    assert not awaiting.receive_from and awaiting.follows == (groups[0].name, groups[1].name)
    assert {type(t.action) for t in awaiting.tasks} == {A.AwaitReduced, A.Update}


def four_dense(ff):
    """Kernels of 512 KiB, 1 MiB, 1 MiB and 8 KiB (float32), biases of 2 KiB and less."""
    x = ff.create_tensor([BATCH, 256], DataType.DT_FLOAT)
    t = x
    for width in (512, 512, 512):
        t = ff.dense(t, width, ActiMode.AC_MODE_RELU)
    return classify(ff, t, [x])


def test_buckets_follow_backward_and_the_bucket_size():
    """DDP's buckets: in the order backward completes the gradients (the last layer's first),
    the first closed once it holds 1 MiB, the others once they hold --bucket-size."""
    def buckets(size_mb):
        argv = ["-ll:gpu", "2", "--in-process", *COLLECTIVES, "--bucket-size", str(size_mb)]
        ff, _ = compiled(four_dense, argv, "sample", 2)
        return [[(key[0], key[1]) for key in t.action.keys]
                for t in actions_of(ff, A.AllReduce) if t.device == 0]
    assert buckets(25) == [[(3, 0), (3, 1), (2, 0)], [(2, 1), (1, 0), (1, 1), (0, 0), (0, 1)]]
    assert buckets(1) == [[(3, 0), (3, 1), (2, 0)], [(2, 1), (1, 0)], [(1, 1), (0, 0), (0, 1)]]


def test_a_layer_moved_off_the_holders_leaves_the_other_buckets_as_they_were():
    """The model's buckets are fixed: a layer whose weights move to one device leaves its
    buckets, and every other bucket keeps its boxes (the search then rebuilds the moved
    layer's buckets alone); the run still gives the single device's numbers."""
    def moved(graph):
        configs = data_parallel_strategy(graph, 2)
        configs[graph.layers[1].name] = ParallelConfig((1, 1), (1,))
        return configs
    argv = ["-ll:gpu", "2", "--in-process", *COLLECTIVES, "--bucket-size", "1"]
    ff, _ = compiled(four_dense, argv, moved, 2)
    assert [[(key[0], key[1]) for key in t.action.keys] for t in actions_of(ff, A.AllReduce)
            if t.device == 0] == [[(3, 0), (3, 1), (2, 0)], [(2, 1)], [(0, 0), (0, 1)]]
    assert_same_run(train(four_dense, argv, moved, 2), train(four_dense, []))


def test_the_hub_sums_in_member_order_and_gathers_copies():
    hub = collectives.LocalHub()
    ends = [hub.for_device(d, np) for d in range(3)]
    parts = [np.full(4, v, np.float32) for v in (1e8, 1.0, -1e8)]
    for end, part in zip(ends, parts):
        end.launch("b", part, (0, 1, 2))
    sums = [end.result("b") for end in ends]
    assert all((s == (parts[0] + parts[1]) + parts[2]).all() for s in sums)
    assert sums[0] is not sums[1]
    for end, part in zip(ends, parts):
        end.launch("g", part, (0, 1, 2), gather=True)
    gathered = ends[1].result("g")
    assert [g[0] for g in gathered] == [1e8, 1.0, -1e8] and gathered[0] is not parts[0]
    with pytest.raises(RuntimeError, match="have not launched"):
        ends[0].launch("c", parts[0], (0, 1))
        ends[0].result("c")


class _Cluster:
    client, workers = None, ["tcp://a:1", "tcp://b:2"]


@pytest.mark.parametrize("flag, address, torch_on, expected", [
    ("off", "", (True, True), False),
    ("auto", None, (True, True), False),     # in this process
    ("on", None, (True, True), True),
    ("auto", "", (True, True), True),        # a local cluster (loopback, TLS: still on)
    ("auto", "tcp://h:8786", (True, True), True),
    ("auto", "tls://h:8786", (True, True), False),  # kept on Dask's encrypted connections
    ("on", "tls://h:8786", (True, True), True),
    ("auto", "tcp://h:8786", (True, False), False),
])
def test_when_the_collectives_are_used(monkeypatch, flag, address, torch_on, expected):
    from flexflow.config import FFConfig
    from flexflow.deployment import uses_collectives
    from flexflow.scheduler import cluster as cluster_module

    cluster = None if address is None else _Cluster()
    monkeypatch.setattr(cluster_module, "run_on", lambda client, workers, during, fn:
                        dict(zip(workers, torch_on)))
    argv = ["--collectives", flag] + (["--scheduler", address] if address else [])
    assert uses_collectives(FFConfig(argv=argv), cluster) is expected


def test_collectives_on_where_a_worker_has_no_torch_is_refused(monkeypatch):
    from flexflow.config import FFConfig, FlagError
    from flexflow.deployment import uses_collectives
    from flexflow.scheduler import cluster as cluster_module

    monkeypatch.setattr(cluster_module, "run_on", lambda client, workers, during, fn:
                        {workers[0]: True, workers[1]: False})
    with pytest.raises(FlagError, match=r"missing on \['tcp://b:2'\]"):
        uses_collectives(FFConfig(argv=["--collectives", "on"]), _Cluster())
