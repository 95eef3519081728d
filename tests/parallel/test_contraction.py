"""Contraction splits (Megatron's row-parallel dense layer, `ParallelConfig.contraction`) change
where the work runs, never results: the Megatron pattern (a dense layer split by output features,
the next by the features it sums over) on 2 and 4 devices, alone and under data parallelism,
with the collectives on and off, with Adam, recomputed, with sharded weights, on a cluster and
inside a pipeline stage (GPipe's schedule and 1F1B's), gives the single device's losses and
weights (1e-5 relative); the sum travels once per box (an all-reduce, or one message per
partition), the bias is read by a box's first partition alone, and readers take the box from
the partition on their device; the memory model predicts what the devices hold; strategy files
and `strategy show` keep the split, and bad ones are refused by name."""

from dataclasses import replace

import numpy as np
import pytest

from flexflow.scheduler import actions as A
from flexflow.scheduler.strategy import ParallelConfig, StrategyError
from flexflow.scheduler.tensor_parallel import dense_pairs, megatron_strategy

from .models import train_losses
from .test_strategy_invariance import Run, weights
from .test_weight_sharding import assert_same_run, compiled, reference

STEPS = 6
PAIRED = ["mlp", "transformer_block", "deep_mlp"]  # the models with a dense pair


def megatron(n, group, **changes):
    """Data parallelism over n devices with each dense pair split over groups of `group`
    devices, every configuration with `changes`."""
    def configs(graph):
        return {name: replace(config, **changes)
                for name, config in megatron_strategy(graph, n, group).items()}
    return configs


def train(name, n, configs, optimizer="sgd", extra=(), argv=None) -> Run:
    argv = argv or ["-ll:gpu", str(n), "--in-process", *extra]
    ff, inputs = compiled(name, argv, configs, optimizer)
    assert any(t.action.contraction > 1 for t in ff.compiled.executor.taskgraph.tasks
               if isinstance(t.action, A.Forward)), "no contraction split: no case"
    return Run(np.array(train_losses(ff, inputs, STEPS)), weights(ff))


# ---- the same numbers ---------------------------------------------------------------------------
@pytest.mark.parametrize("collectives", ["off", "on"])
@pytest.mark.parametrize("n, group", [(2, 2), (4, 4), (4, 2)])
@pytest.mark.parametrize("name", PAIRED)
def test_the_megatron_pattern_gives_single_device_numbers(name, n, group, collectives):
    run = train(name, n, megatron(n, group), extra=["--collectives", collectives])
    assert_same_run(run, reference(name))


@pytest.mark.parametrize("changes", [{"recompute": True}, {"shard_weights": True},
                                     {"recompute": True, "shard_weights": True}])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_recomputed_or_sharded_contraction_gives_single_device_numbers(changes, optimizer):
    """(4 devices in groups of 2: each kernel slice is held by 2 devices, so it has shards.)"""
    run = train("mlp", 4, megatron(4, 2, **changes), optimizer)
    assert_same_run(run, reference("mlp", optimizer))


def test_the_megatron_pattern_on_a_cluster_gives_single_device_numbers():
    from .cluster import two_worker_argv
    with two_worker_argv() as argv:
        run = train("transformer_block", 2, megatron(2, 2), argv=argv)
    assert_same_run(run, reference("transformer_block"))


# ---- the path taken -----------------------------------------------------------------------------
def _tasks(name, n, group, collectives):
    ff, _ = compiled(name, ["-ll:gpu", str(n), "--in-process", "--collectives", collectives],
                     megatron(n, group))
    return ff, ff.compiled.executor.taskgraph.tasks


@pytest.mark.parametrize("collectives", ["off", "on"])
def test_the_partial_outputs_are_summed_once_and_read_where_they_are(collectives):
    """mlp on 2 devices: the second dense's 2 partials travel once each (2 shares of an
    all-reduce, or 2 messages), its bias is read by partition 0 alone, and no value moves
    between the pair or to the ReLU after it: the ReLU on device 0 reads partition 0's copy
    (the only sends are of gradients)."""
    ff, tasks = _tasks("mlp", 2, 2, collectives)
    first, second = dense_pairs(ff.graph)[0]
    kind = A.SharePartial if collectives == "on" else A.SendPartial
    assert sum(isinstance(t.action, kind) and t.key.layer == second.name for t in tasks) == 2
    forwards = {t.action.part: t.action for t in tasks
                if isinstance(t.action, A.Forward) and t.key.layer == second.name}
    assert [len(forwards[p].weight_keys) for p in (0, 1)] == [2, 1]
    assert forwards[0].in_boxes[0].bounds[-1] == (0, 8)
    assert forwards[1].in_boxes[0].bounds[-1] == (8, 16)
    assert all(t.action.grad for t in tasks if isinstance(t.action, A.Send))


def test_readers_take_a_box_from_the_partition_on_their_device():
    """4 devices, pairs split over all 4, the rest data parallel: each ReLU partition reads
    its quarter of the batch from the second dense's partition on its own device."""
    ff, tasks = _tasks("mlp", 4, 4, "off")
    assert not [t for t in tasks if isinstance(t.action, A.Send) and not t.action.grad]


# ---- memory -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, n, group", [("deep_mlp", 2, 2), ("transformer_block", 4, 2)])
def test_the_memory_model_predicts_what_a_contraction_splits_devices_hold(monkeypatch, name,
                                                                          n, group):
    from .test_weight_sharding import peaks
    predicted, held = peaks(name, megatron(n, group), n, monkeypatch)
    for device, (p, h) in enumerate(zip(predicted, held)):
        assert 0.98 * h <= p <= 1.15 * h, (device, p, h)


# ---- strategy files, show and refusals ----------------------------------------------------------
def test_a_json_strategy_file_keeps_the_split_and_the_import_runs_it(tmp_path):
    from flexflow.scheduler import strategy_file
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"], megatron(2, 2))
    path = tmp_path / "megatron.json"
    strategy_file.save(ff.strategy, str(path))
    assert strategy_file.read(str(path)) == ff.strategy
    imported, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process", "--import", str(path)])
    assert imported.strategy == ff.strategy


def test_flexflows_text_format_refuses_a_contraction_split(tmp_path):
    from flexflow.scheduler import strategy_file
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"], megatron(2, 2))
    path = tmp_path / "megatron.txt"
    with pytest.raises(StrategyError, match=r"text format has no field for a contraction "
                                            r"split or replicas \(layers \['Dense_101'\]\)"):
        strategy_file.save(ff.strategy, str(path))
    assert not path.exists()


def test_strategy_show_has_a_contraction_column(tmp_path, capsys):
    from .training import strategy_show_lines
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"], megatron(2, 2))
    lines = strategy_show_lines(ff.strategy, tmp_path, capsys)
    assert lines[0].split()[-1] == "contraction"
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["Dense_101"][1:] == ["1", "x", "1", "2", "0-1", "2"]
    assert rows["Dense_100"][1:] == ["1", "x", "2", "2", "0-1"]


@pytest.mark.parametrize("entry, message", [
    ('{"degrees": [1, 1], "devices": [0, 1], "contraction": 0}', '"contraction" 0'),
    ('{"degrees": [1, 1], "devices": [0, 1], "contraction": "2"}', "\"contraction\" '2'"),
    ('{"degrees": [1, 1], "devices": [0], "contraction": 2}', "2 partitions but 1 device"),
])
def test_a_bad_contraction_in_a_json_file_is_refused_by_name(entry, message):
    from flexflow.scheduler.strategy_file import loads_json
    with pytest.raises(StrategyError, match=message):
        loads_json('{"layers": {"Dense_101": %s}}' % entry)


def _with(name, config):
    def configs(graph):
        strategy = megatron_strategy(graph, 2, 2)
        strategy[name] = config
        return strategy
    return configs


@pytest.mark.parametrize("layer, config, message", [
    ("Dense_101", ParallelConfig((1, 1), (0, 0), contraction=2),
     r"the 2 partitions of output box 0 share a device \(\[0, 0\]\)"),
    ("Dense_101", ParallelConfig((1, 1), (0, 1, 0), contraction=3),
     "contraction 3 does not divide the 16 features"),
    ("ReLU_102", ParallelConfig((1, 1), (0, 1), contraction=2),
     "this operator has no dim to split with partial sums"),
    ("Dense_103", ParallelConfig((1, 1), (0, 1), contraction=2), None),
])
def test_a_contraction_split_that_cannot_run_is_refused_by_name(layer, config, message):
    """(The classifier's dense may sum over a split too: only the model output's producer, the
    softmax, must not: `check_training_output`.)"""
    if message is None:
        compiled("mlp", ["-ll:gpu", "2", "--in-process"], _with(layer, config))
        return
    with pytest.raises(StrategyError, match=f"layer '{layer}'.*{message}"):
        compiled("mlp", ["-ll:gpu", "2", "--in-process"], _with(layer, config))


def test_the_model_outputs_producer_may_not_split_what_it_sums_over():
    from flexflow.scheduler.taskgraph import check_training_output
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"])
    strategy = dict(ff.strategy)
    last = ff.graph.layers[-1].name
    strategy[last] = ParallelConfig((1, 1), (0, 1), contraction=2)
    with pytest.raises(StrategyError, match=f"layer '{last}'.*contraction 2"):
        check_training_output(ff.graph, strategy, ff.compiled.objective)


def test_dense_pairs_are_a_dense_layer_read_by_a_dense_layer_alone():
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"])
    assert [(a.name, b.name) for a, b in dense_pairs(ff.graph)] == [("Dense_100", "Dense_101")]
    ff, _ = compiled("embedding_bag", ["-ll:gpu", "2", "--in-process"])
    assert dense_pairs(ff.graph) == []
    with pytest.raises(ValueError, match="groups of 3 do not divide 2 devices"):
        megatron_strategy(ff.graph, 2, 3)


@pytest.mark.parametrize("recompute", [False, True])
def test_the_memory_model_counts_a_partial_and_its_sum_at_the_forward(recompute):
    """Each partition of the row-parallel layer holds its partial output and the group's sum
    (each the size of the output box) while its forward runs; recomputed, it keeps the sum
    until its backward (the forward runs again from it)."""
    from flexflow.scheduler.memory import MemoryModel
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"],
                     megatron(2, 2, recompute=recompute))
    model = MemoryModel(ff.graph, ff.compiled.objective)
    at = dense_pairs(ff.graph)[0][1].index
    out_bytes = 8 * 8 * 4  # the batch of 8 by 8 features, float32
    partials = [task for task in ff.compiled.executor.taskgraph.tasks
                if isinstance(task.action, A.ForwardPartial)]
    assert len(partials) == 2
    for task in partials:
        expected = [(task.device, at, at, 2 * out_bytes)]
        if recompute:
            expected.append((task.device, at, model.backward_at(at), out_bytes))
        assert list(model.task(task, None)) == expected


@pytest.mark.parametrize("in_flight", [0, 1])
def test_a_megatron_pair_inside_a_pipeline_stage_gives_single_device_numbers(in_flight):
    """mlp on 4 devices in 2 stages of 2 devices, 2 micro-batches: the dense pair on devices
    0-1, column- then row-parallel in each micro-batch, the rest data parallel on 2-3; in
    GPipe's schedule and in 1F1B's (the first stage 1 micro-batch in flight, so that its
    second forward waits for its first backward)."""
    def configs(graph):
        first, second, relu, third, softmax = (layer.name for layer in graph.layers)
        stage = dict(devices=(2, 3, 2, 3), in_flight=in_flight)
        return {first: ParallelConfig((2, 2), (0, 1, 0, 1), in_flight=in_flight),
                second: ParallelConfig((2, 1), (0, 1, 0, 1), contraction=2,
                                       in_flight=in_flight),
                relu: ParallelConfig((4, 1), **stage), third: ParallelConfig((4, 1), **stage),
                softmax: ParallelConfig((4, 1), **stage)}
    ff, _ = compiled("mlp", ["-ll:gpu", "4", "--in-process"], configs)
    waits = [t for t in ff.compiled.executor.taskgraph.tasks if isinstance(t.action, A.Forward)
             and any(d.phase == "backward" for d in t.deps)]
    assert bool(waits) == bool(in_flight)
    run = train("mlp", 4, configs, extra=["--collectives", "off"])
    assert_same_run(run, reference("mlp"))
