"""bench/dnn.py's gpt2_medium is GPT-2 medium's shape, and on the paper's 16 P100s the memory
model holds what recomputation saves: every layer recomputed, data parallelism at global batch
32 with Adam needs less memory per device and more time."""

import math
from dataclasses import replace
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"


def test_gpt2_medium_has_gpt2_mediums_blocks_and_weights(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import dnn
    graph, _ = dnn.graph_of(dnn.gpt2_medium, 2)
    weights = sum(math.prod(w.shape) for layer in graph.layers for w in layer.weights
                  if w.trainable)
    assert weights == 405_285_969  # 355 M, less the position table, and an output layer
    attention = [layer for layer in graph.layers if layer.type_name == "MultiHeadAttention"]
    assert len(attention) == 24
    assert graph.tensors[graph.layers[-1].outputs[0]].spec.shape == (2, 1024, 50257)


def test_recomputing_gpt2_medium_trades_time_for_memory_on_16_p100s(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import dnn

    from flexflow.core import LossType
    from flexflow.losses import loss_function
    from flexflow.ops.optimizers import Adam
    from flexflow.scheduler import machine
    from flexflow.scheduler.simulator import Simulator
    from flexflow.scheduler.strategy import data_parallel_strategy
    graph, objective = dnn.graph_of(dnn.gpt2_medium, 32)
    output = graph.tensors[graph.layers[-1].outputs[0]].spec
    loss = loss_function(LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, (), 32,
                         output.size // 32, True)
    simulator = Simulator(graph, objective, machine.preset("p100-4x4"), loss, Adam(alpha=1e-4))
    plain = data_parallel_strategy(graph, 16)
    recomputed = {name: replace(config, recompute=True) for name, config in plain.items()}
    a, b = simulator.simulate_full(plain), simulator.simulate_full(recomputed)
    assert max(b.memory) < 0.8 * max(a.memory)
    assert a.time < b.time < 1.2 * a.time


def test_the_hand_made_baselines_are_fsdp_and_tensor_parallelism_in_a_node(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import dnn
    import gpt2_baselines

    from flexflow.scheduler.strategy import validate
    graph, _ = dnn.graph_of(dnn.transformer_lm, 8)
    fsdp = gpt2_baselines.fsdp_recomputed(graph, 4)
    validate(graph, fsdp, 4)
    weighted = {layer.name for layer in graph.layers if layer.weights}
    assert all(c.recompute and c.shard_weights == (n in weighted) for n, c in fsdp.items())
    tensor = gpt2_baselines.tensor_in_node(graph, 2, 2)
    validate(graph, tensor, 4)
    by_type = {layer.type_name: tensor[layer.name].degrees for layer in graph.layers}
    assert by_type["Dense"] == (2, 1, 2)  # batch over nodes, output features inside one
    assert by_type["Embedding"] == (2, 1, 2)
    assert by_type["MultiHeadAttention"] == (2, 2, 1)  # positions inside a node
    assert all(c.devices == (0, 1, 2, 3) for c in tensor.values())


def test_the_hand_made_baselines_include_the_pipelines_and_their_recomputed_forms(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import dnn
    import gpt2_baselines

    from flexflow.scheduler.strategy import validate
    graph, _ = dnn.graph_of(dnn.transformer_lm, 64)
    baselines = gpt2_baselines.hand_made(graph)
    for name, strategy in baselines.items():
        validate(graph, strategy, 16)
        assert all(c.recompute == ("recomputation" in name or "recomputed" in name)
                   for c in strategy.values()), name
    for micro in (2, 4, 8):
        pipeline = baselines[f"pipeline across nodes, {micro} micro-batches"]
        assert {c.micro_batches for c in pipeline.values()} == {micro}
        stages = [c.devices[:4] for c in pipeline.values()]
        assert stages == sorted(stages) and {s[0] for s in stages} == {0, 4, 8, 12}
        assert not any(c.in_flight for c in pipeline.values())
        one_f_one_b = baselines[f"pipeline across nodes, {micro} micro-batches, 1F1B"]
        assert {(c.devices[0] // 4, c.in_flight) for c in one_f_one_b.values()} == {
            (s, min(4 - s, micro)) for s in range(4)}  # stage s: 4 - s in flight


def test_the_megatron_baseline_makes_each_mlps_second_dense_row_parallel_and_splits_heads(
        monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import dnn
    import gpt2_baselines

    from flexflow.scheduler.strategy import validate
    graph, _ = dnn.graph_of(dnn.transformer_lm, 8)
    megatron = gpt2_baselines.megatron_in_node(graph, 2, 2)
    validate(graph, megatron, 4)
    dense = [layer for layer in graph.layers if layer.type_name == "Dense"]
    rows = [layer for layer in dense if megatron[layer.name].contraction == 2]
    assert rows and len(rows) == (len(dense) - 1) // 2  # one a block; the classifier not
    for layer in rows:
        assert megatron[layer.name].degrees == (2, 1, 1)
    attention = [layer for layer in graph.layers if layer.type_name == "MultiHeadAttention"]
    assert attention and all(megatron[layer.name].contraction == 2 for layer in attention)
    by_positions = gpt2_baselines.megatron_in_node(graph, 2, 2, heads=False)
    assert all(by_positions[layer.name].contraction == 1
               and by_positions[layer.name].degrees[1] == 2 for layer in attention)
    assert all(by_positions[layer.name] == megatron[layer.name] for layer in rows)
    norms = [layer for layer in graph.layers if layer.type_name in ("LayerNorm", "Add")]
    assert norms and all(megatron[layer.name].replicas == 2
                         and megatron[layer.name].degrees[0] == 2 for layer in norms)
    assert not any(c.replicas > 1 for c in by_positions.values())


def test_gpt2_memorys_systems_are_the_networks_they_name(monkeypatch):
    """bench/gpt2_memory.py: PyTorch's twin has the builder's weights at the sizes it is
    given; transformers' GPT-2 keeps its dropout and tanh GELU except in `hf_plain`, and
    each system trains."""
    transformers = pytest.importorskip("transformers")
    monkeypatch.syspath_prepend(str(BENCH))
    import dnn
    import gpt2_memory
    sizes = {"SEQ": 16, "VOCAB": 100, "WIDTH": 32, "HEADS": 4, "LAYERS": 2}
    for name, value in sizes.items():
        monkeypatch.setattr(gpt2_memory, name, value)
    graph, _ = dnn.graph_of(lambda ff, b: dnn.transformer_lm(
        ff, b, seq=16, vocab=100, width=32, heads=4, layers=2), 2)
    builder_weights = sum(math.prod(w.shape) for layer in graph.layers for w in layer.weights
                          if w.trainable)
    twin = gpt2_memory.torch_network("torch_twin")
    assert sum(p.numel() for p in twin.parameters()) == builder_weights
    configs = {system: gpt2_memory.torch_network(system).net.config
               for system in ("hf_eager", "hf_sdpa", "hf_plain")}
    assert configs["hf_eager"]._attn_implementation == "eager"
    assert configs["hf_sdpa"]._attn_implementation == "sdpa"
    for system in ("hf_eager", "hf_sdpa"):
        assert configs[system].attn_pdrop == configs[system].resid_pdrop == 0.1
        assert configs[system].activation_function == "gelu_new"
    assert configs["hf_plain"].attn_pdrop == configs["hf_plain"].resid_pdrop == 0.0
    assert configs["hf_plain"].activation_function == "gelu"
    assert isinstance(configs["hf_plain"], transformers.GPT2Config)
    for system in ("torch_twin", "hf_plain"):
        assert gpt2_memory.torch_steps(system, batch=2, steps=1) == {}
