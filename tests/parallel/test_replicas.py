"""Replicated layers (`ParallelConfig.replicas`: each output box computed whole by r
partitions on devices of their own, as Megatron-LM runs a block's layer norms and residual adds
on every device of its group). They change where the work runs, never results: Megatron's whole
layout (dense pairs, heads-split attention, everything between replicated) on 2 and 4 devices,
under data parallelism, with the collectives on and off, with Adam, recomputed and on a
cluster, gives the single device's losses and weights; each replica's backward takes the
gradient pieces made on its own device (a box's first replica also those made where it has no
replica), so no value or gradient moves between the replicas; the memory model predicts what
the devices hold; strategy files, `strategy show` and the search's block keep the count, and
what cannot run is refused by name."""

from dataclasses import replace

import numpy as np
import pytest

from flexflow.scheduler import actions as A
from flexflow.scheduler.strategy import ParallelConfig, StrategyError, data_parallel_strategy
from flexflow.scheduler.taskgraph import _replicas_share
from flexflow.scheduler.tensor_parallel import megatron_strategy, replicated_layers

from .models import train_losses
from .test_strategy_invariance import Run, weights
from .test_weight_sharding import assert_same_run, compiled, reference

STEPS = 6


def megatron(n, group, **changes):
    """Megatron-LM's layout over groups of `group` of n devices, every config with `changes`."""
    def configs(graph):
        return {name: replace(config, **changes) for name, config in
                megatron_strategy(graph, n, group, replicate=True).items()}
    return configs


def train(name, n, configs, optimizer="sgd", extra=(), argv=None) -> Run:
    argv = argv or ["-ll:gpu", str(n), "--in-process", *extra]
    ff, inputs = compiled(name, argv, configs, optimizer)
    assert any(c.replicas > 1 for c in ff.strategy.values()), "nothing replicated: no case"
    return Run(np.array(train_losses(ff, inputs, STEPS)), weights(ff))


# ---- the same numbers ---------------------------------------------------------------------------
@pytest.mark.parametrize("collectives", ["off", "on"])
@pytest.mark.parametrize("n, group", [(2, 2), (4, 2), (4, 4)])
@pytest.mark.parametrize("name", ["transformer_block", "mlp"])
def test_megatrons_whole_layout_gives_single_device_numbers(name, n, group, collectives):
    run = train(name, n, megatron(n, group), extra=["--collectives", collectives])
    assert_same_run(run, reference(name))


@pytest.mark.parametrize("changes, optimizer", [({"recompute": True}, "sgd"), ({}, "adam")])
def test_replicas_recomputed_or_with_adam_give_single_device_numbers(changes, optimizer):
    name = "transformer_block" if optimizer == "sgd" else "concat_cnn"
    run = train(name, 4, megatron(4, 2, **changes), optimizer)
    assert_same_run(run, reference(name, optimizer))


def test_replicas_on_a_cluster_give_single_device_numbers():
    from .cluster import two_worker_argv
    with two_worker_argv() as argv:
        run = train("transformer_block", 2, megatron(2, 2), argv=argv)
    assert_same_run(run, reference("transformer_block"))


def test_a_replicated_layer_read_by_fewer_devices_gives_single_device_numbers():
    """The mlp's ReLU replicated on 2 devices, every other layer on device 1 alone: replica 0
    (device 0) takes the gradient made where the box has no replica, replica 1 its own."""
    def configs(graph):
        strategy = {name: ParallelConfig(config.degrees, (1,))
                    for name, config in data_parallel_strategy(graph, 1).items()}
        relu = next(layer for layer in graph.layers if layer.type_name == "ReLU")
        strategy[relu.name] = ParallelConfig((1, 1), (0, 1), replicas=2)
        return strategy
    assert_same_run(train("mlp", 2, configs), reference("mlp"))


# ---- the path taken -----------------------------------------------------------------------------
def test_a_replicas_gradient_is_what_its_device_made():
    pieces = [("box", 0, "a"), ("box", 1, "b"), ("box", 2, "c"), ("box", 1, "d")]
    config = ParallelConfig((1, 1), (0, 1), replicas=2)
    assert _replicas_share(pieces, config, 0) == [("box", 0, "a"), ("box", 2, "c")]
    assert _replicas_share(pieces, config, 1) == [("box", 1, "b"), ("box", 1, "d")]


def test_no_value_moves_and_gradients_move_only_into_the_split_layers():
    """transformer_block on 2 devices in one group: forward, the split layers' partial sums
    are the only messages (each replica reads its input on its device); backward, the
    replicas' partial gradients are summed where a split layer reads its output's gradient
    whole (Megatron's backward all-reduce), and nowhere else."""
    ff, _ = compiled("transformer_block", ["-ll:gpu", "2", "--in-process", "--collectives",
                                           "off"], megatron(2, 2))
    tasks = ff.compiled.executor.taskgraph.tasks
    sends = [t for t in tasks if isinstance(t.action, A.Send)]
    assert [t for t in tasks if isinstance(t.action, A.SendPartial)]
    assert sends and all(t.action.grad for t in sends)
    assert {ff.strategy[t.key.part[0]].contraction for t in sends} == {2}


@pytest.mark.parametrize("n, group", [(2, 2), (4, 2)])
def test_the_memory_model_predicts_what_replicas_hold(monkeypatch, n, group):
    from .test_weight_sharding import assert_predicted_as_data_parallelism
    assert_predicted_as_data_parallelism("transformer_block", megatron(n, group), n,
                                         monkeypatch)


# ---- files, show and refusals -------------------------------------------------------------------
def test_a_json_file_keeps_the_replicas_and_the_text_format_refuses_them(tmp_path):
    from flexflow.scheduler import strategy_file
    ff, _ = compiled("transformer_block", ["-ll:gpu", "2", "--in-process"], megatron(2, 2))
    strategy_file.save(ff.strategy, str(tmp_path / "s.json"))
    assert strategy_file.read(str(tmp_path / "s.json")) == ff.strategy
    with pytest.raises(StrategyError, match="no field for a contraction split or replicas"):
        strategy_file.save(ff.strategy, str(tmp_path / "s.txt"))


def test_strategy_show_and_the_best_strategy_block_name_the_replicas(tmp_path, capsys):
    import io

    from flexflow.scheduler.search import print_strategy

    from .training import strategy_show_lines
    ff, _ = compiled("transformer_block", ["-ll:gpu", "2", "--in-process"], megatron(2, 2))
    lines = strategy_show_lines(ff.strategy, tmp_path, capsys)
    assert lines[0].split()[-2:] == ["contraction", "replicas"]
    norm = next(line for line in lines if line.startswith("LayerNorm"))
    assert norm.split()[-2:] == ["0-1", "2"]
    block = io.StringIO()
    print_strategy(ff.graph, ff.strategy, block)
    assert "device_ids[0,1] replicas(2)" in block.getvalue()


@pytest.mark.parametrize("kind, config, message", [
    ("LayerNorm", ParallelConfig((1, 1, 1), (0, 0), replicas=2),
     r"share a device \(\[0, 0\]\)"),
    ("Dense", ParallelConfig((1, 1, 1), (0, 1, 2, 3), contraction=2, replicas=2),
     "replicas 2 with contraction 2: one or the other"),
    ("LayerNorm", ParallelConfig((1, 1, 1), (), replicas=0), "replicas 0: at least 1"),
])
def test_replicas_that_cannot_run_are_refused_by_name(kind, config, message):
    def configs(graph):
        strategy = megatron_strategy(graph, 4, 2, replicate=True)
        name = next(layer.name for layer in graph.layers if layer.type_name == kind)
        return {**strategy, name: config}
    with pytest.raises(StrategyError, match=f"{kind}_.*{message}"):
        compiled("transformer_block", ["-ll:gpu", "4", "--in-process"], configs)


def test_a_replicated_batch_norm_over_a_split_batch_and_the_output_are_refused():
    from flexflow.scheduler.taskgraph import check_training_output

    def configs(graph):
        strategy = data_parallel_strategy(graph, 4)
        norm = next(layer.name for layer in graph.layers if layer.type_name == "BatchNorm")
        return {**strategy, norm: replace(strategy[norm], degrees=(2, 1, 1, 1),
                                          devices=(0, 1, 2, 3), replicas=2)}
    with pytest.raises(StrategyError, match=r"BatchNorm_.*replicas 2 with the dims it reduces "
                                            r"over split \(\[0\]\)"):
        compiled("cnn_batch_norm", ["-ll:gpu", "4", "--in-process"], configs)
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"])
    last = ff.graph.layers[-1].name
    strategy = {**ff.strategy, last: ParallelConfig((1, 1), (0, 1), replicas=2)}
    with pytest.raises(StrategyError, match=f"layer '{last}'.*replicas 2"):
        check_training_output(ff.graph, strategy, ff.compiled.objective)


def test_megatron_replicates_what_lies_between_its_split_layers():
    ff, _ = compiled("transformer_block", ["-ll:gpu", "2", "--in-process"])
    found = {layer.type_name for layer in replicated_layers(ff.graph)}
    assert {"LayerNorm", "Add"} <= found
    assert not found & {"Dense", "Embedding", "MultiHeadAttention", "Softmax"}
