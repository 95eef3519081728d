"""Parallel configurations: how each layer's output is split and where the parts run.

Degrees are kept in batch-first (Python) order; FlexFlow's files store them reversed, and the
file readers convert. Partition p has grid coordinates `unravel_index(p, degrees)` in C order
(the last dim varies fastest), which is FlexFlow's order for its reversed `dim[]`.
"""

from __future__ import annotations

import math
from collections import Counter

from dataclasses import dataclass
from itertools import product
from typing import Mapping

from ..ops.box import Box
from ..ops.graph import Graph, Layer


class StrategyError(ValueError):
    """A strategy does not fit the model or the machine; the message names the layer."""


@dataclass(frozen=True)
class ParallelConfig:
    degrees: tuple[int, ...]  # parts per output dim, batch-first
    devices: tuple[int, ...]  # device of each partition, in partition order
    # activation recomputation: the forward keeps only its inputs, and backward runs it again
    # for what it would have kept (less memory held from forward to backward, one more forward)
    recompute: bool = False
    # sharded weights (ZeRO-3/FSDP): each trainable weight box held by several devices stays cut
    # into shards (`shards.py`) between uses, each holder keeping its own shard and that shard's
    # optimizer state; the whole box is gathered before the layer's forward and its backward
    # and freed after each (less memory held throughout, more bytes sent every iteration)
    shard_weights: bool = False
    # a split of the dim the operator sums over (`Operator.contraction`: a dense layer's input
    # features, Megatron's row-parallel layer): each output box is computed by this many
    # partitions (box b's are parts b*c .. b*c + c-1, on devices of their own), each from its
    # slice of the inputs and weights, and their partial outputs summed (an all-reduce, with
    # the collectives) so that each holds the box's value
    contraction: int = 1
    # 1F1B's schedule for a layer run in micro-batches (several parts on one device, a pipeline
    # stage, scheduler/pipelines.py): a device starts the forward of its micro-batch j + k only
    # after the backward of its micro-batch j, so it holds the activations of k micro-batches
    # at most (k = the stages from this one to the last); 0: GPipe's, every forward first
    in_flight: int = 0
    # replicated computation: each output box computed whole by this many partitions, on
    # devices of their own, from whole inputs (as Megatron runs a block's layer norms and
    # residual adds on every device of its tensor-parallel group, so that the split layers
    # read their inputs where they run); each replica's backward takes the gradient pieces
    # made on its device, so that the replicas' input and weight gradients are partial sums
    replicas: int = 1

    @property
    def copies(self) -> int:
        """The partitions holding each output box: box b's are parts b*copies .. +copies-1."""
        return self.contraction * self.replicas

    @property
    def num_parts(self) -> int:
        return math.prod(self.degrees) * self.copies

    @property
    def micro_batches(self) -> int:
        """How many parts of the layer its busiest device runs one after another (1: none; a
        pipeline stage's micro-batches, scheduler/pipelines.py)."""
        return max(Counter(self.devices).values(), default=1)

    def boxes(self, shape: tuple[int, ...]) -> list[Box]:
        """Equal boxes of `shape`, in partition order."""
        ranges = []
        for n, d in zip(shape, self.degrees):
            step = n // d
            ranges.append([(i * step, (i + 1) * step) for i in range(d)])
        return [Box(tuple(bounds)) for bounds in product(*ranges)]

    @staticmethod
    def data_parallel(rank: int, devices: int, batch: int) -> "ParallelConfig":
        """Split the batch dim over as many of `devices` as divide it."""
        degree = max(d for d in range(1, devices + 1) if batch % d == 0 and devices % d == 0)
        return ParallelConfig((degree,) + (1,) * (rank - 1), tuple(range(degree)))


Strategy = Mapping[str, ParallelConfig]  # layer name -> config


def data_parallel_strategy(graph: Graph, num_devices: int) -> dict[str, ParallelConfig]:
    """FlexFlow's default: every layer split along the batch over all devices. A layer whose
    dim 0 its operator cannot split (a reshape that regroups samples, a transpose that moves
    another dim first) runs whole on device 0."""
    strategy = {}
    for layer in graph.layers:
        out = graph.tensors[layer.outputs[0]].spec
        splits = layer.op.dim_kinds(graph.in_specs(layer))[0] is not None
        strategy[layer.name] = ParallelConfig.data_parallel(out.ndim, num_devices if splits else 1,
                                                            out.shape[0])
    return strategy


def validate(graph: Graph, strategy: Strategy, num_devices: int) -> None:
    """Check every layer has a config that divides its output and uses existing devices."""
    for layer in graph.layers:
        if layer.name not in strategy:
            raise StrategyError(f"strategy has no configuration for layer '{layer.name}'")
        check_config(graph, layer, strategy[layer.name], num_devices)
    unknown = set(strategy) - {layer.name for layer in graph.layers}
    if unknown:
        raise StrategyError(f"strategy names layers the model does not have: {sorted(unknown)}")


def check_config(graph: Graph, layer: Layer, config: ParallelConfig, num_devices: int) -> None:
    shape = graph.tensors[layer.outputs[0]].spec.shape
    where = f"layer '{layer.name}' ({layer.type_name}, output {shape})"
    if len(config.degrees) != len(shape):
        raise StrategyError(f"{where}: config has {len(config.degrees)} dims, output has "
                            f"{len(shape)}")
    if len(config.devices) != config.num_parts:
        raise StrategyError(f"{where}: {config.num_parts} partitions but "
                            f"{len(config.devices)} device ids")
    for dim, (n, d) in enumerate(zip(shape, config.degrees)):
        if d < 1 or n % d:
            raise StrategyError(f"{where}: degree {d} does not divide dim {dim} of size {n}")
    bad = [d for d in config.devices if not 0 <= d < num_devices]
    if bad:
        raise StrategyError(f"{where}: device ids {bad} do not exist ({num_devices} devices)")
    kinds = layer.op.dim_kinds(graph.in_specs(layer))
    for dim, d in enumerate(config.degrees):
        if d > 1 and kinds[dim] is None:
            raise StrategyError(f"{where}: dim {dim} cannot be split by this operator")
    if config.contraction != 1:
        _check_contraction(graph, layer, config, where)
    if config.replicas != 1:
        _check_replicas(layer, config, where)
    if config.in_flight:
        _check_in_flight(config, where)


def _check_in_flight(config: ParallelConfig, where: str) -> None:
    """1F1B bounds the micro-batches a device holds at once: at least one, at most as many
    as the layer gives a device. Not with sharded weights: a device gathers a sharded box once
    for all its micro-batches' forwards and once for their backwards, after every
    micro-batch's previous step, which 1F1B's interleaving cannot wait for."""
    micro = config.micro_batches
    if not 1 <= config.in_flight <= micro:
        raise StrategyError(f"{where}: {config.in_flight} micro-batches in flight (1F1B) but "
                            f"the layer gives a device {micro}; between 1 and {micro}")
    if config.shard_weights:
        raise StrategyError(f"{where}: 1F1B with sharded weights: a device gathers the weights "
                            f"once for every micro-batch's forward and once for the backwards; "
                            f"run it in GPipe's schedule or unsharded")


def _check_contraction(graph: Graph, layer: Layer, config: ParallelConfig, where: str) -> None:
    """A contraction split needs an operator that sums over a dim it divides, and each box's
    partitions on devices of their own (each holds the box's value)."""
    c = config.contraction
    found = layer.op.contraction(graph.in_specs(layer))
    if found is None:
        raise StrategyError(f"{where}: contraction {c}: this operator has no dim to split "
                            f"with partial sums (dense layers do)")
    if c < 1 or found.size % c:
        raise StrategyError(f"{where}: contraction {c} does not divide the {found.size} "
                            f"{found.what} the layer sums over")
    _check_own_devices(config, where)


def _check_replicas(layer: Layer, config: ParallelConfig, where: str) -> None:
    """Replicas compute a box whole, each on a device of its own; not with a contraction
    split, nor where partitions combine partials (a split reduction dim)."""
    r = config.replicas
    if r < 1:
        raise StrategyError(f"{where}: replicas {r}: at least 1")
    if config.contraction > 1:
        raise StrategyError(f"{where}: replicas {r} with contraction {config.contraction}: "
                            f"one or the other")
    split = [d for d in layer.op.reduction_dims if config.degrees[d % len(config.degrees)] > 1]
    if split:
        raise StrategyError(f"{where}: replicas {r} with the dims it reduces over split "
                            f"({split})")
    _check_own_devices(config, where)


def _check_own_devices(config: ParallelConfig, where: str) -> None:
    """Each of an output box's partitions on a device of its own."""
    c = config.copies
    for b in range(0, config.num_parts, c):
        held = config.devices[b:b + c]
        if len(set(held)) < c:
            raise StrategyError(f"{where}: the {c} partitions of output box {b // c} share a "
                                f"device ({list(held)}); each needs one of its own")
