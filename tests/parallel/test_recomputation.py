"""Activation recomputation (`ParallelConfig.recompute`) changes memory and time, never results:
every model trained with every layer recomputed, alone and under a split on 2 devices, in this
process and on a cluster, gives the single-device run's losses and weights; a dropout layer
draws the same mask again; batch norm's running statistics move once a step."""

from dataclasses import replace

import numpy as np
import pytest

from flexflow.core import ActiMode, DataType

from .models import BATCH, MODELS, classify, strategy
from .test_strategy_invariance import assert_same_run, compiled, fit, reference, train, weights


def recomputed(kind=None, n=1, every=1):
    """The strategy of `kind` on n devices (data parallel without one) with every `every`-th
    layer recomputed (the last one, which the loss reads, too)."""
    def configs(graph):
        base = (strategy(kind, graph, n) if kind else
                {layer.name: _whole(graph, layer, n) for layer in graph.layers})
        return {name: replace(config, recompute=i % every == 0)
                for i, (name, config) in enumerate(base.items())}
    return configs


def _whole(graph, layer, n):
    from flexflow.scheduler.strategy import ParallelConfig
    shape = graph.tensors[layer.outputs[0]].spec.shape
    return ParallelConfig((n,) + (1,) * (len(shape) - 1), tuple(range(n)))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_recomputing_every_layer_gives_single_device_numbers(name):
    run = train(MODELS[name], [], recomputed())
    assert_same_run(run, reference(name))


@pytest.mark.parametrize("name, kind", [("cnn_batch_norm", "sample"), ("mlp", "parameter"),
                                        ("transformer_block", "attribute"),
                                        ("residual_block", "reshard")])
def test_recomputing_under_a_split_gives_single_device_numbers(name, kind):
    run = train(MODELS[name], ["-ll:gpu", "2", "--in-process"], recomputed(kind, 2, every=2), 2)
    assert_same_run(run, reference(name))


def dropout_mlp(ff):
    x = ff.create_tensor([BATCH, 12], DataType.DT_FLOAT)
    t = ff.dropout(ff.dense(x, 16, ActiMode.AC_MODE_RELU), 0.5, 7)
    return classify(ff, t, [x])


def test_a_recomputed_dropout_draws_the_same_mask():
    plain = train(dropout_mlp, [])
    again = train(dropout_mlp, [], recomputed())
    assert_same_run(again, plain)


def test_batch_norm_running_statistics_move_once_a_step():
    def running(ff):
        return {k: v for k, v in weights(ff).items() if "running" in k}
    ff, inputs = compiled(MODELS["cnn_batch_norm"], [])
    fit(ff, inputs)
    ff_again, inputs = compiled(MODELS["cnn_batch_norm"], [], recomputed())
    fit(ff_again, inputs)
    for key, value in running(ff).items():
        np.testing.assert_allclose(running(ff_again)[key], value, rtol=1e-5, err_msg=key)


def test_recomputing_on_a_cluster_gives_single_device_numbers():
    from .cluster import loopback_cluster
    from flexflow.scheduler import cluster as cluster_module
    with loopback_cluster(workers=2) as address:
        try:
            run = train(MODELS["cnn_batch_norm"], ["--scheduler", address, "-ll:gpu", "2"],
                        recomputed("sample", 2), 2)
        finally:
            cluster_module.disconnect(address)
    assert_same_run(run, reference("cnn_batch_norm"))


# ---- memory -------------------------------------------------------------------------------------
def peaks(name, configs, monkeypatch) -> tuple[int, int]:
    """(predicted, held) peak bytes of a training step of model `name` on one device, held
    counted inside each backward too (`held_peaks`)."""
    from ..search.test_memory_model import held_peaks, predicted_peaks
    from .models import batches
    ff, inputs = compiled(MODELS[name], [], configs)
    [(xs, labels)] = batches(inputs, 1)
    for tensor, array in zip(inputs, xs):
        tensor.set_tensor(ff, array)
    ff.label_tensor.set_tensor(ff, labels)
    return predicted_peaks(ff)[0], held_peaks(ff, monkeypatch, inside_backward=True)[0]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_memory_model_predicts_what_a_recomputing_device_holds(monkeypatch, name):
    predicted, held = peaks(name, recomputed(), monkeypatch)
    assert predicted == pytest.approx(held, rel=0.1)


def test_recomputing_attention_holds_less(monkeypatch):
    """Attention keeps its probabilities and more for backward: recomputed, a step holds a
    sixth less, and the model says so."""
    plain = peaks("transformer_block", None, monkeypatch)
    again = peaks("transformer_block", recomputed(), monkeypatch)
    assert again[0] < 0.85 * plain[0] and again[1] < 0.9 * plain[1], (plain, again)
