"""What shows that a run trained: its loss fell and every weight the optimizer updates moved.
The strategy tests compare each run with the single-device one; this check on the single-device
run is what keeps them from passing when no run trains at all. Also: readers of a run's
weights and of its printed metric lines."""

from __future__ import annotations

import re

import numpy as np

LAST_STEPS = 3  # the loss of the last steps, averaged, is what must be below the first step's
MOVED = 1e-3    # a weight moved when its change is over this, relative to its size (at least 1)


def assert_trains(graph, initial: dict, losses, final: dict) -> None:
    """Asserts that the mean loss of the last steps is below the first step's, and that every
    weight the optimizer updates moved (`initial` and `final` map "layer.weight" to its value)."""
    assert np.mean(losses[-LAST_STEPS:]) < losses[0], f"the loss did not fall: {losses}"
    for key in updated_weights(graph) - vanishing_gradient_weights(graph):
        change, size = np.linalg.norm(final[key] - initial[key]), np.linalg.norm(initial[key])
        assert change > MOVED * max(size, 1.0), f"{key} did not move ({change:.3g})"


def updated_weights(graph) -> set[str]:
    """The weights the optimizer updates: the trainable ones (not batch norm's running
    statistics, which the forward pass updates whether or not anything trains)."""
    return {f"{layer.name}.{weight.name}" for layer in graph.layers for weight in layer.weights
            if weight.trainable}


def vanishing_gradient_weights(graph) -> set[str]:
    """The weights whose gradient is zero in exact arithmetic, which training moves only by
    float32 rounding: the bias of a layer without activation whose output only batch norms read
    (each subtracts its channel's batch mean, the bias with it), and attention's key bias (it
    shifts all of a query's scores alike, and softmax ignores a shift)."""
    keys = set()
    for layer in graph.layers:
        readers = graph.consumers(layer.outputs[0])
        if (getattr(layer.op, "activation", None) == "none" and readers
                and all(reader.type_name == "BatchNorm" for reader, _ in readers)):
            keys |= {f"{layer.name}.{w.name}" for w in layer.weights if w.name == "bias"}
        if layer.type_name == "MultiHeadAttention":
            keys |= {f"{layer.name}.{w.name}" for w in layer.weights if w.name == "k_bias"}
    return keys


def all_weights(ff) -> list[np.ndarray]:
    """Every weight of `ff`, layer by layer."""
    return [ff.get_layer_by_id(i).get_parameter_by_id(k).get_weights(ff)
            for i in range(len(ff.graph.layers))
            for k in range(ff.get_layer_by_id(i).get_number_parameters())]


def metric_lines(capsys) -> list[str]:
    """The `[Metrics]` lines printed to stderr since the last reading."""
    return [line for line in capsys.readouterr().err.splitlines() if "[Metrics]" in line]


def numbers(line: str) -> list[float]:
    """The numbers of a printed line."""
    return [float(v) for v in re.findall(r"[-+]?\d+\.?\d*(?:e[-+]?\d+)?", line)]


def strategy_show_lines(strategy, folder, capsys) -> list[str]:
    """The lines `flexflow strategy show` prints for `strategy`, saved as JSON in `folder`."""
    from flexflow.cli import main
    from flexflow.scheduler import strategy_file
    path = folder / "shown.json"
    strategy_file.save(strategy, str(path))
    capsys.readouterr()
    assert main(["strategy", "show", str(path)]) == 0
    return capsys.readouterr().out.splitlines()
