"""What bench/memory.py and bench/paper_memory.py rest on: PyTorch modules replayed from
bench/dnn.py's builders are the builders' networks, the strategies of `--split` split what they
say, and the extrapolation is the line through the last two batches."""

from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).parents[2] / "bench"
torch = pytest.importorskip("torch")


@pytest.fixture
def bench(monkeypatch):
    """bench/ importable, as its scripts have it."""
    monkeypatch.syspath_prepend(str(BENCH))
    import dnn
    import memory
    import paper_memory
    import torch_replay
    return dnn, memory, paper_memory, torch_replay


def trainable_volume(graph) -> int:
    return sum(int(np.prod(w.spec.shape)) for layer in graph.layers for w in layer.weights
               if w.trainable)


@pytest.mark.parametrize("name, image", [("resnet18", 32), ("inception_v3", 299)])
def test_a_replayed_module_has_the_builders_weights_and_outputs(bench, name, image):
    dnn, _, _, torch_replay = bench
    net = torch_replay.replayed(getattr(dnn, name), (3, image, image))
    graph, _ = dnn.graph_of(getattr(dnn, name), 2)
    assert sum(p.numel() for p in net.parameters()) == trainable_volume(graph)
    logits = net(torch.zeros(2, 3, image, image))
    assert tuple(logits.shape) == graph.tensors[graph.layers[-1].outputs[0]].spec.shape
    logits.sum().backward()  # it trains
    assert all(p.grad is not None for p in net.parameters())


def test_the_splits_split_what_they_say(bench):
    dnn, memory, _, _ = bench
    from flexflow.scheduler.strategy import validate
    graph, _ = dnn.graph_of(dnn.cifar10_cnn, 64)
    for split in memory.SPLITS:
        strategy = memory.split_strategy(graph, split, 2)
        validate(graph, strategy, 2)
        for layer in graph.layers:
            kind = type(layer.op).__name__
            degrees = strategy[layer.name].degrees
            if split == "parameter" and kind == "Dense":
                assert degrees == (1, 2)
            elif split == "attribute" and kind in ("Conv2D", "Pool2D") and degrees[0] == 1:
                assert degrees == (1, 1, 2, 1)
            else:
                assert degrees[0] == 2 and set(degrees[1:]) == {1}, (split, layer.name)
    attribute = memory.split_strategy(graph, "attribute", 2)
    assert sum(c.degrees[2:3] == (2,) for c in attribute.values()) >= 2


def test_the_footprint_at_64_is_the_line_through_the_last_two_batches(bench):
    paper_memory = bench[2]
    assert paper_memory.extrapolated([2, 4, 8], [0, 100, 180], 64) == 180 + 20 * 56
