"""Pipelines (scheduler/pipelines.py: stages of layers on their own devices, the batch in
micro-batches a device runs one after another) change the schedule, never results: every model
trained as a pipeline on 2 and 4 devices, with the collectives on and off, with Adam, with
recomputation and sharded weights, in this process and on a cluster, gives the single device's
losses and weights (1e-5 relative); each micro-batch runs in a fused group of its own, which the
next stage's group of the same micro-batch receives from; the memory model predicts what the
devices hold; strategy files and `strategy show` keep the micro-batches."""

from dataclasses import replace

import numpy as np
import pytest

from flexflow.scheduler import actions as A
from flexflow.scheduler.fusion import fuse
from flexflow.scheduler.pipelines import pipeline_strategy

from .models import MODELS, train_losses
from .test_strategy_invariance import Run, weights
from .test_weight_sharding import assert_same_run, compiled, reference

STEPS = 6


def pipeline(n, stages, micro, **changes):
    """The pipeline of `stages` stages on n devices in `micro` micro-batches, every
    configuration with `changes` (recompute=True, shard_weights=True)."""
    def configs(graph):
        return {name: replace(config, **changes)
                for name, config in pipeline_strategy(graph, n, stages, micro).items()}
    return configs


def train(name, n, configs, optimizer="sgd", extra=(), argv=None) -> Run:
    """Trained on n in-process devices with `extra` flags, or with `argv` where given."""
    argv = argv or ["-ll:gpu", str(n), "--in-process", *extra]
    ff, inputs = compiled(name, argv, configs, optimizer)
    lanes = {t.lane for t in ff.compiled.executor.taskgraph.tasks}
    assert lanes != {0}, "no device runs micro-batches: no case"
    return Run(np.array(train_losses(ff, inputs, STEPS)), weights(ff))


# ---- the same numbers ---------------------------------------------------------------------------
@pytest.mark.parametrize("n, stages, micro", [(2, 2, 2), (2, 2, 4), (4, 2, 2), (4, 4, 2)])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_pipeline_gives_single_device_numbers(name, n, stages, micro):
    assert_same_run(train(name, n, pipeline(n, stages, micro), extra=["--collectives", "off"]),
                    reference(name))


@pytest.mark.parametrize("changes", [{}, {"shard_weights": True, "recompute": True}])
@pytest.mark.parametrize("name", ["cnn_batch_norm", "transformer_block"])
def test_a_pipeline_with_the_collectives_on_gives_single_device_numbers(name, changes):
    """(Sharded weights then all-gathered over each stage's devices.)"""
    run = train(name, 4, pipeline(4, 2, 2, **changes), extra=["--collectives", "on"])
    assert_same_run(run, reference(name))


@pytest.mark.parametrize("changes", [{"recompute": True}, {"shard_weights": True},
                                     {"recompute": True, "shard_weights": True}])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_recomputed_or_sharded_pipeline_gives_single_device_numbers(changes, optimizer):
    """(Adam on concat_cnn: it would turn the float noise of attention's key bias, whose
    gradient is zero, into steps.)"""
    name = "concat_cnn" if optimizer == "adam" else "transformer_block"
    run = train(name, 4, pipeline(4, 2, 4, **changes), optimizer)
    assert_same_run(run, reference(name, optimizer))


def test_a_pipeline_on_a_cluster_gives_single_device_numbers():
    from .cluster import two_worker_argv
    with two_worker_argv() as argv:
        run = train("transformer_block", 2, pipeline(2, 2, 4), argv=argv)
    assert_same_run(run, reference("transformer_block"))


# ---- the schedule -------------------------------------------------------------------------------
def _forward_groups(groups, device):
    """{lane: the group} of the groups on `device` that run forwards, by their forwards' lane."""
    found = {}
    for group in groups:
        lanes = {t.lane for t in group.tasks if isinstance(t.action, A.Forward)}
        if group.device == device and lanes:
            assert len(lanes) == 1, (group.name, lanes)
            found[lanes.pop()] = group
    return found


def test_each_micro_batch_runs_in_a_group_the_next_stage_receives_alone():
    """2 stages x 4 micro-batches on 2 devices: device 0 runs 4 forward groups, one a
    micro-batch, in order; device 1's group of micro-batch j receives from device 0's group of
    micro-batch j and from no later one; device 0's backward comes in 4 groups too, in lanes
    after the forwards' (GPipe's order)."""
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"], pipeline(2, 2, 4))
    groups = fuse(ff.compiled.executor.taskgraph.tasks)
    first, second = _forward_groups(groups, 0), _forward_groups(groups, 1)
    assert sorted(first) == sorted(second) == [0, 1, 2, 3]
    order = [g.name for g in groups if g.device == 0]
    assert [order.index(first[j].name) for j in range(4)] == sorted(
        order.index(first[j].name) for j in range(4))
    for j in range(4):
        assert first[j].name in second[j].receive_from
        assert not {first[k].name for k in range(j + 1, 4)} & set(second[j].receive_from)
    backward_lanes = {t.lane for g in groups if g.device == 0 for t in g.tasks
                      if isinstance(t.action, A.Backward)}
    assert backward_lanes == {4, 5, 6, 7}
    assert len({g.name for g in groups if g.device == 0 and any(
        isinstance(t.action, A.Backward) for t in g.tasks)}) == 4


def test_without_micro_batches_every_lane_is_0():
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"])
    assert {t.lane for t in ff.compiled.executor.taskgraph.tasks} == {0}


# ---- memory -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mlp", "transformer_block"])
def test_the_memory_model_predicts_what_a_pipelines_devices_hold(monkeypatch, name):
    """A stage's device holds its layers' weights and every micro-batch's activations
    (GPipe's schedule; the model counts the whole batch's): never more than predicted (2% for
    rounding), and at most 25% less: the devices drop each micro-batch's arrays at its last
    read (scheduler/last_use.py), where the model, whose positions are per layer, holds what a
    layer's forward makes and the next one reads for every micro-batch at once (23% of the
    transformer block's last stage, 11% of the tiny mlp's first)."""
    from .test_weight_sharding import peaks
    predicted, held = peaks(name, pipeline(2, 2, 4), 2, monkeypatch)
    for device, (p, h) in enumerate(zip(predicted, held)):
        assert 0.98 * h <= p <= 1.25 * h, (device, p, h)


# ---- strategy files and show --------------------------------------------------------------------
@pytest.mark.parametrize("suffix", ["json", "txt"])
def test_a_strategy_file_keeps_the_micro_batches_and_the_import_runs_them(tmp_path, suffix):
    from flexflow.scheduler import strategy_file
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"], pipeline(2, 2, 4))
    path = tmp_path / f"pipeline.{suffix}"
    strategy_file.save(ff.strategy, str(path))
    assert strategy_file.read(str(path)) == ff.strategy
    imported, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process", "--import", str(path)])
    assert {t.lane for t in imported.compiled.executor.taskgraph.tasks} == set(range(8))


def test_strategy_show_lists_each_stages_devices_once_with_its_micro_batches(tmp_path, capsys):
    from .training import strategy_show_lines
    ff, _ = compiled("mlp", ["-ll:gpu", "4", "--in-process"], pipeline(4, 2, 2))
    lines = strategy_show_lines(ff.strategy, tmp_path, capsys)
    assert lines[0].split() == ["layer", "degrees", "(batch", "first)", "parts", "devices",
                                "micro-batches"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["Dense_100"][-2:] == ["0-1", "2"] and rows["Softmax_104"][-2:] == ["2-3", "2"]


def test_micro_batches_count_a_devices_parts():
    from flexflow.scheduler.strategy import ParallelConfig
    assert ParallelConfig((4, 1), (0, 1, 2, 3)).micro_batches == 1
    assert ParallelConfig((6, 1), (4, 5, 4, 5, 4, 5)).micro_batches == 3


def test_a_pipeline_that_the_batch_cannot_feed_is_refused_by_name():
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"])
    with pytest.raises(ValueError, match="16 micro-batches over 1 devices do not divide the "
                                         "batch of 8 of layer 'Dense_100'"):
        pipeline_strategy(ff.graph, 2, 2, 16)
    with pytest.raises(ValueError, match="3 stages do not divide 2 devices"):
        pipeline_strategy(ff.graph, 2, 3, 2)


def test_stages_are_contiguous_and_balanced_by_work():
    from flexflow.scheduler.pipelines import stage_of_layers
    assert stage_of_layers([1, 1, 1, 1], 2) == [0, 0, 1, 1]
    assert stage_of_layers([6, 1, 1, 1, 1], 2) == [0, 1, 1, 1, 1]
    assert stage_of_layers([1, 1, 1, 1, 1, 1, 1, 1], 4) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_a_devices_micro_batch_gradients_are_summed_into_one_array_of_its_own():
    """The first part's gradient is kept as made; the second is added into a new array, and
    every later one into that array in place (m parts: two arrays, not m)."""
    from flexflow.scheduler.store import DeviceStore
    store = DeviceStore(0, np)
    key = (0, 0, None)
    parts = [np.full(3, float(j + 1), np.float32) for j in range(4)]
    store.add_weight_grad(key, parts[0])
    assert store.weight_grads[key] is parts[0]
    store.add_weight_grad(key, parts[1])
    total = store.weight_grads[key]
    assert total is not parts[0] and total is not parts[1]
    for part in parts[2:]:
        store.add_weight_grad(key, part)
        assert store.weight_grads[key] is total
    np.testing.assert_array_equal(total, [10, 10, 10])
    np.testing.assert_array_equal(parts[0], [1, 1, 1])
    store.clear_weight_grads()
    store.add_weight_grad(key, parts[3])
    assert store.weight_grads[key] is parts[3]
