"""1F1B's schedule for pipelines (`ParallelConfig.in_flight`, scheduler/pipelines.py): each
device of stage s runs k = (stages - s) forwards, then a backward and a forward in turn, so that
it holds k micro-batches' activations at most. It changes the order, never results: trained as
1F1B pipelines on 2 and 4 devices, in this process and on a cluster, with recomputation, Adam
and the collectives, every model gives the single device's losses and weights; each
device runs its micro-batches in 1F1B's order; the devices hold what the memory model predicts,
less than GPipe's; what cannot be kept in 1F1B's order is refused by name; strategy files,
`strategy show` and the search's block keep the schedule."""

from dataclasses import replace

import numpy as np
import pytest

from flexflow.scheduler import actions as A
from flexflow.scheduler.fusion import fuse
from flexflow.scheduler.pipelines import one_f_one_b_lanes, pipeline_strategy
from flexflow.scheduler.strategy import ParallelConfig, StrategyError

from .models import MODELS, train_losses
from .test_strategy_invariance import Run, weights
from .test_weight_sharding import assert_same_run, compiled, peaks, reference

STEPS = 6
# (a batch norm over the batch reads every micro-batch at once: refused, tested below)
ORDERED = sorted(set(MODELS) - {"cnn_batch_norm", "residual_block"})


def one_f_one_b(n, stages, micro, **changes):
    """The 1F1B pipeline of `stages` stages on n devices in `micro` micro-batches, every
    configuration with `changes`."""
    def configs(graph):
        return {name: replace(config, **changes) for name, config in
                pipeline_strategy(graph, n, stages, micro, schedule="1F1B").items()}
    return configs


def train(name, n, configs, optimizer="sgd", extra=(), argv=None) -> Run:
    argv = argv or ["-ll:gpu", str(n), "--in-process", *extra]
    ff, inputs = compiled(name, argv, configs, optimizer)
    assert any(c.in_flight for c in ff.strategy.values()), "no 1F1B: no case"
    return Run(np.array(train_losses(ff, inputs, STEPS)), weights(ff))


# ---- the same numbers ---------------------------------------------------------------------------
@pytest.mark.parametrize("n, stages, micro", [(2, 2, 4), (4, 2, 2), (4, 4, 2)])
@pytest.mark.parametrize("name", ORDERED)
def test_a_1f1b_pipeline_gives_single_device_numbers(name, n, stages, micro):
    assert_same_run(train(name, n, one_f_one_b(n, stages, micro), extra=["--collectives", "off"]),
                    reference(name))


@pytest.mark.parametrize("collectives", ["on", "off"])
def test_a_recomputed_1f1b_pipeline_gives_single_device_numbers(collectives):
    run = train("transformer_block", 4, one_f_one_b(4, 2, 4, recompute=True),
                extra=["--collectives", collectives])
    assert_same_run(run, reference("transformer_block"))


def test_a_1f1b_pipeline_with_adam_gives_single_device_numbers():
    assert_same_run(train("concat_cnn", 2, one_f_one_b(2, 2, 4), "adam"),
                    reference("concat_cnn", "adam"))


def test_a_1f1b_pipeline_on_a_cluster_gives_single_device_numbers():
    from .cluster import two_worker_argv
    with two_worker_argv() as argv:
        run = train("transformer_block", 2, one_f_one_b(2, 2, 4), argv=argv)
    assert_same_run(run, reference("transformer_block"))


# ---- the order ----------------------------------------------------------------------------------
def test_the_lanes_put_k_forwards_first_then_alternate():
    def order(k, m):
        lanes = {}
        for j in range(m):
            forward, backward = one_f_one_b_lanes(j, k, m)
            lanes[forward], lanes[backward] = f"F{j}", f"B{j}"
        assert sorted(lanes) == list(range(2 * m))
        return [lanes[lane] for lane in sorted(lanes)]
    assert order(2, 4) == ["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"]
    assert order(1, 3) == ["F0", "B0", "F1", "B1", "F2", "B2"]
    assert order(3, 3) == ["F0", "F1", "F2", "B0", "B1", "B2"]  # GPipe's


def device_order(ff, device):
    """The micro-batches' forwards and backwards on `device` as it runs them ("F0", "B0"...)."""
    groups = fuse(ff.compiled.executor.taskgraph.tasks)
    order = []
    for group in groups:
        if group.device != device:
            continue
        for task in group.tasks:
            if type(task.action) not in (A.Forward, A.Backward):
                continue
            config = ff.strategy[ff.graph.layers[task.action.layer].name]
            j = config.devices[:task.action.part].count(device)
            label = ("F" if type(task.action) is A.Forward else "B") + str(j)
            if not order or order[-1] != label:
                order.append(label)
    return order


def test_each_device_runs_its_micro_batches_in_1f1b_order():
    """2 stages x 4 micro-batches on 2 devices: the first stage has 2 in flight, the last 1;
    in GPipe's schedule every forward comes first."""
    ff, _ = compiled("transformer_block", ["-ll:gpu", "2", "--in-process"],
                     one_f_one_b(2, 2, 4))
    assert device_order(ff, 0) == ["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"]
    assert device_order(ff, 1) == ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]
    gpipe, _ = compiled("transformer_block", ["-ll:gpu", "2", "--in-process"],
                        lambda graph: pipeline_strategy(graph, 2, 2, 4))
    assert device_order(gpipe, 1) == ["F0", "F1", "F2", "F3", "B0", "B1", "B2", "B3"]


# ---- memory -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mlp", "transformer_block"])
def test_the_memory_model_predicts_what_a_1f1b_stage_holds_less_than_gpipe(monkeypatch, name):
    """Within 10% of what each device holds (the model counts k micro-batches' activations of
    a stage, and what it receives for the sender's k); less than GPipe's on every device, as
    held and as predicted."""
    predicted, held = peaks(name, one_f_one_b(2, 2, 4), 2, monkeypatch)
    gpipe = peaks(name, lambda graph: pipeline_strategy(graph, 2, 2, 4), 2, monkeypatch)
    for device, (p, h) in enumerate(zip(predicted, held)):
        assert 0.9 * h <= p <= 1.1 * h, (device, p, h)
        assert p < gpipe[0][device] and h < gpipe[1][device], (device, p, h, gpipe)


def test_the_simulator_counts_a_1f1b_stage_fewer_micro_batches():
    """A deep MLP in 8 micro-batches over 2 stages: the first stage holds 2 micro-batches'
    activations instead of 8, the last 1 instead of 8."""
    from ..search.test_pipeline_search import simulator_of
    simulator = simulator_of(devices=2)
    gpipe = simulator.simulate(pipeline_strategy(simulator.graph, 2, 2, 8))
    ours = simulator.simulate(pipeline_strategy(simulator.graph, 2, 2, 8, schedule="1F1B"))
    assert all(m < g for m, g in zip(ours.memory, gpipe.memory)), (ours.memory, gpipe.memory)


# ---- refusals -----------------------------------------------------------------------------------
def test_more_in_flight_than_micro_batches_is_refused_by_name():
    def configs(graph):
        strategy = pipeline_strategy(graph, 2, 2, 4, schedule="1F1B")
        name = graph.layers[0].name
        return {**strategy, name: replace(strategy[name], in_flight=5)}
    with pytest.raises(StrategyError, match="Dense_100.*5 micro-batches in flight.*between "
                                            "1 and 4"):
        compiled("mlp", ["-ll:gpu", "2", "--in-process"], configs)


def test_1f1b_with_sharded_weights_is_refused_by_name():
    with pytest.raises(StrategyError, match="Dense_100.*1F1B with sharded weights"):
        compiled("mlp", ["-ll:gpu", "2", "--in-process"],
                 one_f_one_b(2, 2, 4, shard_weights=True))


def test_a_layer_that_reads_every_micro_batch_after_a_1f1b_stage_is_refused_by_name():
    """The last dense layer run whole on device 1: the first micro-batch's backward would wait
    for every micro-batch's forward, which 1F1B puts after it."""
    def configs(graph):
        strategy = pipeline_strategy(graph, 2, 2, 4, schedule="1F1B")
        dense = [layer.name for layer in graph.layers if layer.type_name == "Dense"][-1]
        shape = len(strategy[dense].degrees)
        return {**strategy, dense: ParallelConfig((1,) * shape, (1,))}
    with pytest.raises(StrategyError, match="1F1B's order of its micro-batches cannot be kept"):
        compiled("mlp", ["-ll:gpu", "2", "--in-process"], configs)


def test_1f1b_is_refused_for_a_batch_norm_over_the_batch_and_an_unknown_schedule():
    ff, _ = compiled("cnn_batch_norm", ["-ll:gpu", "2", "--in-process"])
    with pytest.raises(ValueError, match="1F1B: layer 'BatchNorm_.*' sums over every "
                                         "micro-batch"):
        pipeline_strategy(ff.graph, 2, 2, 2, schedule="1F1B")
    with pytest.raises(ValueError, match="schedule 'zigzag' is none of"):
        pipeline_strategy(ff.graph, 2, 2, 2, schedule="zigzag")


def test_the_search_never_accepts_a_proposal_1f1b_cannot_order():
    from flexflow.scheduler.search import _scored

    def refuse(strategy):
        raise StrategyError("layer 'x': 1F1B's order of its micro-batches cannot be kept")
    assert _scored(refuse, {}) == ((True, float("inf")), float("inf"))


# ---- files and show -----------------------------------------------------------------------------
def test_a_json_strategy_file_keeps_the_schedule_and_text_warns_and_drops_it(tmp_path):
    from flexflow.scheduler import strategy_file
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"], one_f_one_b(2, 2, 4))
    strategy_file.save(ff.strategy, str(tmp_path / "s.json"))
    assert strategy_file.read(str(tmp_path / "s.json")) == ff.strategy
    with pytest.warns(UserWarning, match="no 1F1B schedule"):
        strategy_file.save(ff.strategy, str(tmp_path / "s.txt"))
    assert not any(c.in_flight for c in strategy_file.read(str(tmp_path / "s.txt")).values())


@pytest.mark.parametrize("value", ["-1", '"2"', "1.5", "true"])
def test_a_bad_in_flight_entry_is_refused_by_name(value):
    from flexflow.scheduler import strategy_file
    text = ('{"layers": {"d": {"degrees": [4, 1], "devices": [0, 1, 0, 1], "in_flight": '
            + value + "}}}")
    with pytest.raises(StrategyError, match=f"layer 'd' has \"in_flight\" .*integer from 0"):
        strategy_file.loads_json(text, "s.json")


def test_strategy_show_and_the_best_strategy_block_name_the_schedule(tmp_path, capsys):
    import io

    from flexflow.scheduler.search import print_strategy

    from .training import strategy_show_lines
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"], one_f_one_b(2, 2, 4))
    rows = {line.split()[0]: line.split("  ") for line in
            strategy_show_lines(ff.strategy, tmp_path, capsys)[1:]}
    assert [c.strip() for c in rows["Dense_100"] if c][-2:] == ["0", "4, 1F1B: 2 in flight"]
    assert [c.strip() for c in rows["Softmax_104"] if c][-2:] == ["1", "4, 1F1B: 1 in flight"]
    block = io.StringIO()
    print_strategy(ff.graph, ff.strategy, block)
    assert "device_ids[0,0,0,0] 1f1b(2)" in block.getvalue()


def test_the_share_a_first_stage_holds_is_its_in_flight_over_its_micro_batches():
    from flexflow.scheduler.pipelines import held_share
    ff, _ = compiled("mlp", ["-ll:gpu", "2", "--in-process"])
    assert held_share(pipeline_strategy(ff.graph, 2, 2, 4)) == 1.0
    assert held_share(pipeline_strategy(ff.graph, 2, 2, 4, schedule="1F1B")) == 0.5
    assert held_share(pipeline_strategy(ff.graph, 2, 2, 2, schedule="1F1B")) == 1.0


def test_a_forward_alone_runs_a_1f1b_pipeline_and_predicts_as_one_device():
    """A forward pass (no backward to wait for) of the trained pipeline gives the single
    device's probabilities."""
    from .models import batches
    found = []
    for n, configs in ((1, None), (2, one_f_one_b(2, 2, 4))):
        argv = ["-ll:gpu", "2", "--in-process"] if n > 1 else []
        ff, inputs = compiled("transformer_block", argv, configs)
        train_losses(ff, inputs, 2)
        [(xs, _)] = batches(inputs, 1, seed=7)
        for tensor, array in zip(inputs, xs):
            tensor.set_tensor(ff, array)
        ff.forward(training=False)
        found.append(ff.get_last_layer().get_output_tensor().get_tensor(ff))
    np.testing.assert_allclose(found[1], found[0], rtol=1e-5, atol=1e-6)
