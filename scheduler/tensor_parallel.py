"""Megatron's tensor parallelism in our strategy space: of two dense layers in a row, the first
split by its output features (column-parallel) and the second by the features it sums over
(`ParallelConfig.contraction`: row-parallel), so that each device of a group keeps its slice of
the hidden features between them and the group sums the second's partial outputs once (an
all-reduce with the collectives), where splitting both by output features would gather the
hidden features and the output; and each attention split by its heads (its projections inside
it: `ops/attention.py`), each device of a group attending with its share of the heads and the
group summing their outputs once.

This module finds such pairs and builds the strategies that use them (the search's candidate
and the benches' baselines); the partitions themselves are `taskgraph`'s.
"""

from __future__ import annotations

from ..ops.graph import Graph, Layer
from .strategy import ParallelConfig, data_parallel_strategy


def dense_pairs(graph: Graph) -> list[tuple[Layer, Layer]]:
    """(first, second) for each dense layer read by a dense layer alone, the second not the
    model's last layer (whose output the loss reads whole), each layer in one pair at most."""
    pairs, taken = [], set()
    readers: dict[int, list[Layer]] = {}
    for layer in graph.layers:
        for tensor in layer.inputs:
            readers.setdefault(tensor, []).append(layer)
    for first in graph.layers:
        found = readers.get(first.outputs[0], [])
        if first.type_name != "Dense" or first.index in taken or len(found) != 1:
            continue
        second = found[0]
        if second.type_name == "Dense" and second is not graph.layers[-1]:
            pairs.append((first, second))
            taken.update((first.index, second.index))
    return pairs


def megatron_strategy(graph: Graph, num_devices: int, group: int,
                      base: dict[str, ParallelConfig] | None = None, heads: bool = True,
                      replicate: bool = False) -> dict[str, ParallelConfig]:
    """`base` (data parallelism over `num_devices` by default) with each of `dense_pairs`
    split Megatron's way over groups of `group` consecutive devices, (where `heads`) each
    attention whose heads `group` divides split by its heads over them, and (where
    `replicate`) every other layer without a dense kernel or an embedding, but the last,
    replicated over each group (`replicated_layers`), the batch over the groups. Raises
    ValueError naming the layer where a pair's sizes do not divide."""
    if num_devices % group:
        raise ValueError(f"groups of {group} do not divide {num_devices} devices")
    strategy = dict(base or data_parallel_strategy(graph, num_devices))
    groups, devices = num_devices // group, tuple(range(num_devices))
    for first, second in dense_pairs(graph):
        shape = graph.tensors[first.outputs[0]].spec.shape
        if shape[0] % groups or shape[-1] % group:
            raise ValueError(f"layer '{first.name}' (output {shape}) cannot split its batch "
                             f"{groups} ways and its features {group} ways")
        unsplit = (1,) * (len(shape) - 2)
        strategy[first.name] = ParallelConfig((groups, *unsplit, group), devices)
        rank = len(graph.tensors[second.outputs[0]].spec.shape)
        strategy[second.name] = ParallelConfig((groups,) + (1,) * (rank - 1), devices,
                                               contraction=group)
    for layer in head_split_layers(graph, group) if heads else ():
        shape = graph.tensors[layer.outputs[0]].spec.shape
        if shape[0] % groups == 0:
            strategy[layer.name] = ParallelConfig((groups,) + (1,) * (len(shape) - 1), devices,
                                                  contraction=group)
    for layer in replicated_layers(graph) if replicate else ():
        shape = graph.tensors[layer.outputs[0]].spec.shape
        if shape[0] % groups == 0:
            strategy[layer.name] = ParallelConfig((groups,) + (1,) * (len(shape) - 1), devices,
                                                  replicas=group)
    return strategy


def replicated_layers(graph: Graph) -> list[Layer]:
    """The layers Megatron runs whole on each device of a group: those between its split
    layers (layer norms, residual adds, activations), that is, every layer but the dense
    layers, embeddings and attention, the model's last and those whose batch dim cannot
    split."""
    kept = ("Dense", "Embedding", "MultiHeadAttention")
    return [layer for layer in graph.layers[:-1] if layer.type_name not in kept
            and layer.op.dim_kinds(graph.in_specs(layer))[0] is not None]


def head_split_layers(graph: Graph, group: int) -> list[Layer]:
    """The attention layers whose heads `group` divides (not the model's last layer)."""
    found = []
    for layer in graph.layers[:-1]:
        if layer.type_name == "MultiHeadAttention":
            heads = layer.op.contraction(graph.in_specs(layer)).size
            if heads % group == 0:
                found.append(layer)
    return found


MEGATRON_GROUPS = (2, 4, 8)  # the group sizes of the search's Megatron candidates


def megatron_candidates(graph: Graph, num_devices: int) -> dict[str, dict[str, ParallelConfig]]:
    """The search's candidates by name: `megatron_strategy` in groups of each of
    MEGATRON_GROUPS that divides the devices and the sizes (none without dense pairs or an
    attention whose heads the group divides)."""
    found = {}
    pairs = bool(dense_pairs(graph))
    for group in MEGATRON_GROUPS:
        if group <= num_devices and num_devices % group == 0 and (
                pairs or head_split_layers(graph, group)):
            try:
                found[f"megatron, groups of {group}"] = megatron_strategy(graph, num_devices,
                                                                         group)
            except ValueError:
                continue
    return found
