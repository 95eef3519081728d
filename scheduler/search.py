"""MCMC strategy search, as FlexFlow's (reference 8.2-8.3), scored by the simulator. A proposal
picks a random layer and gives it a random configuration: a degree for each output dim its
operator declares splittable, of a kind the flags enable (sample always; parameter with
`--enable-parameter-parallel`; attribute with `--enable-attribute-parallel`), dividing the dim,
with at most as many parts as devices; the parts go to a contiguous block of devices starting
anywhere (operator placement); with `--enable-recomputation`, recomputation or not, at even odds
(the simulator costs the second forward, and the memory it saves counts through the memory
penalty); with `--enable-weight-sharding`, for a layer with trainable weights, sharded weights
or not, at even odds (the simulator costs the gathers' messages, and the memory model the shards
and the transient whole boxes); with `--enable-pipeline-parallel`, at even odds instead, the
configuration of the layer before or after it, where that fits it (which moves a pipeline's
stage boundary by a layer, and carries its schedule, GPipe's or 1F1B's), and a random
configuration may then be run in 2, 4 or 8 micro-batches (GPipe's schedule; a proposal whose
1F1B order cannot be kept is never accepted: `_scored`). Picking the last layer proposes no
change (FlexFlow's rule; the loss reads its output whole per sample). A proposal slower than the
current strategy by `delta` ms is accepted with probability exp(-alpha * delta); every
budget/100 proposals the search returns to the best strategy so far. `budget + 1` proposals are
scored, as in FlexFlow. Beyond FlexFlow's memory penalty (1 ms per MB over), a strategy over
some device's memory never replaces one that fits, as the current or the best strategy, and one
that fits always replaces one that does not: once the search has found a strategy within the
memory limit, it returns one.

The search starts from the best of its initial candidates: data parallelism, the imported
strategy if any, (when parameter parallelism is enabled, since it uses it) the "one weird
trick": data-parallel convolutions, dense layers split by output features over all devices,
(when recomputation is enabled) data parallelism recomputing every layer, and (when weight
sharding is enabled) data parallelism with every weighted layer's weights sharded (and every
layer recomputed too, where recomputation is enabled), and (when pipelines are enabled)
pipelines of 2 stages and more, each stage data parallel over its share of the devices, in 2, 4
or 8 micro-batches, in GPipe's schedule, and in 1F1B's where GPipe's does not fit
(`one_f_one_b_twins`; scheduler/pipelines.py). Where recomputation is enabled and data
parallelism does not fit, one more: data parallelism recomputing the fewest layers, most memory
saved per flop first, that fits (`selective_recomputation`).
Proposals draw from `random.Random(seed)` and acceptance from a stream of its own seeded by
`seed` too, so a seed gives one result; with `processes` above 1, proposals are scored several
at once in forked processes (scheduler/speculation.py), the same chain in less time.
"""

from __future__ import annotations

import gc
import math
import random
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from itertools import product
from typing import Callable

from ..ops.graph import Graph, Layer
from ..ops.spec import DimKind
from .pipelines import (MICRO_BATCH_COUNTS, held_share, one_f_one_b_name,
                        pipeline_candidates)
from .simulator import Simulation, Simulator
from .speculation import Scorers
from .strategy import ParallelConfig, Strategy, StrategyError, data_parallel_strategy
from .tensor_parallel import megatron_candidates

BEST_HEADER = "=========== Best Discovered Strategy =========="
BEST_FOOTER = "============= MCMC Search Finished ============"


@dataclass(frozen=True)
class SearchOptions:
    budget: int
    alpha: float = 1.0
    enable_sample_parallel: bool = True
    enable_parameter_parallel: bool = False
    enable_attribute_parallel: bool = False
    seed: int = 0
    delta: bool = True  # delta simulation (False: rebuild every proposal, for comparison)
    processes: int = 1  # processes scoring proposals at once (scheduler/speculation.py)
    enable_recomputation: bool = False  # proposals may recompute a layer's forward in backward
    enable_weight_sharding: bool = False  # proposals may shard a layer's weights (ZeRO-3)
    enable_pipeline_parallel: bool = False  # pipelines among the candidates; proposals may
    #                                         give a layer its neighbour's configuration
    contraction_splits: bool = True  # with parameter parallelism, Megatron's splits (contraction,
    #   replicas) among the proposals and candidates; off where the best strategy is exported to
    #   FlexFlow's text format, which cannot hold them

    def kinds(self) -> set[DimKind]:
        kinds = set()
        if self.enable_sample_parallel:
            kinds.add(DimKind.SAMPLE)
        if self.enable_parameter_parallel:
            kinds.add(DimKind.PARAMETER)
        if self.enable_attribute_parallel:
            kinds.add(DimKind.ATTRIBUTE)
        return kinds


@dataclass
class SearchResult:
    best: dict[str, ParallelConfig]
    best_cost: float                 # ms (simulated, memory penalty included)
    candidates: dict[str, float]     # initial candidate -> simulated cost (ms)
    proposals: int
    seconds: float


class SearchSpace:
    """The configurations the search may give each layer."""

    def __init__(self, graph: Graph, num_devices: int, options: SearchOptions):
        self.graph = graph
        self.num_devices = num_devices
        self.kinds = options.kinds()
        self.recomputation = options.enable_recomputation
        self.sharding = options.enable_weight_sharding
        self.pipelines = options.enable_pipeline_parallel
        self.contraction_splits = options.contraction_splits
        self._degrees: dict[int, list[tuple[int, ...]]] = {}
        self._summed: dict[int, int] = {}  # layer -> size of the dim it may sum over split (0)

    def degrees(self, layer: Layer) -> list[tuple[int, ...]]:
        """Every degree tuple: splittable dims of enabled kinds, each degree dividing its dim,
        at most `num_devices` parts in all (the unsplit tuple included)."""
        if layer.index not in self._degrees:
            shape = self.graph.tensors[layer.outputs[0]].spec.shape
            kinds = layer.op.dim_kinds(self.graph.in_specs(layer))
            choices = [[d for d in range(1, min(n, self.num_devices) + 1) if n % d == 0]
                       if kind in self.kinds else [1] for n, kind in zip(shape, kinds)]
            self._degrees[layer.index] = [
                c for c in product(*choices) if math.prod(c) <= self.num_devices]
        return self._degrees[layer.index]

    def propose(self, current: Strategy, rng: random.Random) -> Strategy:
        """FlexFlow's proposal: a random layer given a random configuration (with pipelines,
        at even odds its neighbour's instead). Picking the last layer, or drawing the
        configuration the layer has, proposes `current` itself (about one proposal in five
        draws a data-parallel layer's own configuration: the search need not simulate it)."""
        layers = self.graph.layers
        index = rng.randrange(len(layers))
        if index == len(layers) - 1:
            return current
        layer = layers[index]
        config = (self.neighbour_config(layer, current, rng)
                  if self.pipelines and rng.random() < 0.5 else self.random_config(layer, rng))
        if config == current[layer.name]:
            return current
        proposal = dict(current)
        proposal[layer.name] = config
        return proposal

    def random_config(self, layer: Layer, rng: random.Random) -> ParallelConfig:
        """Degrees, a block of devices and, where enabled, recomputation and (for a layer
        with trainable weights) sharded weights (a coin each; a coin is not drawn otherwise,
        so a seed's proposals stay those of the version before), and with pipelines a count
        of micro-batches (`micro_batched`)."""
        degrees = rng.choice(self.degrees(layer))
        contraction = self.contraction(layer, math.prod(degrees), rng)
        parts = math.prod(degrees) * contraction
        start = rng.randrange(self.num_devices - parts + 1)
        recompute = self.recomputation and rng.random() < 0.5
        shard = (self.sharding and any(w.trainable for w in layer.weights)
                 and rng.random() < 0.5)
        config = ParallelConfig(degrees, tuple(range(start, start + parts)), recompute, shard,
                                contraction)
        return self.micro_batched(layer, config, rng) if self.pipelines else config

    def contraction(self, layer: Layer, parts: int, rng: random.Random) -> int:
        """With parameter parallelism, for a layer that may split the dim it sums over (a
        dense layer, but the model's last): at even odds 1, else a count dividing that dim
        that the devices left hold (Megatron's row-parallel split), each alike. 1 (and no
        draw) otherwise."""
        counts = self.contraction_counts(layer, parts)
        if not counts or rng.random() < 0.5:
            return 1
        return rng.choice(counts)

    def micro_batched(self, layer: Layer, config: ParallelConfig, rng: random.Random
                      ) -> ParallelConfig:
        """`config` run in 1 or one of MICRO_BATCH_COUNTS micro-batches (at even odds among
        them), where its batch dim allows: the batch degree times the count, the block of
        devices repeated as often (each device then runs its parts one after another)."""
        micro = rng.choice((1, *MICRO_BATCH_COUNTS))
        batch = self.graph.tensors[layer.outputs[0]].spec.shape[0]
        sample = DimKind.SAMPLE in self.kinds and layer.op.dim_kinds(
            self.graph.in_specs(layer))[0] is not None
        if micro == 1 or not sample or batch % (config.degrees[0] * micro):
            return config
        return replace(config, degrees=(config.degrees[0] * micro,) + config.degrees[1:],
                       devices=config.devices * micro)

    def neighbour_config(self, layer: Layer, current: Strategy, rng: random.Random
                         ) -> ParallelConfig:
        """The configuration of the layer before or after it in graph order, where it fits this
        layer (same rank, degrees dividing its dims along dims it can split): what moves a
        pipeline's stage boundary by one layer, or merges a layer into its neighbours' split.
        Its own configuration where the neighbour's does not fit."""
        layers = self.graph.layers
        other = layers[min(max(layer.index + rng.choice((-1, 1)), 0), len(layers) - 1)]
        config = current[other.name]
        shape = self.graph.tensors[layer.outputs[0]].spec.shape
        kinds = layer.op.dim_kinds(self.graph.in_specs(layer))
        fits = len(config.degrees) == len(shape) and all(
            n % d == 0 and (d == 1 or kind in self.kinds)
            for n, d, kind in zip(shape, config.degrees, kinds)) and (
            config.contraction == 1 or self._contracts(layer, config.contraction))
        if not fits:
            return current[layer.name]
        shard = config.shard_weights and any(w.trainable for w in layer.weights)
        return replace(config, shard_weights=shard)

    def contraction_counts(self, layer: Layer, parts: int) -> list[int]:
        """The counts above 1 the layer may split the dim it sums over into, beside `parts`
        parts of its output (none without parameter parallelism or contraction splits)."""
        if DimKind.PARAMETER not in self.kinds or not self.contraction_splits:
            return []
        return [c for c in range(2, self.num_devices // parts + 1) if self._contracts(layer, c)]

    def _contracts(self, layer: Layer, count: int) -> bool:
        """Whether the layer may split the dim it sums over `count` ways (its size asked of
        the operator once a layer: every proposal asks)."""
        if layer.index not in self._summed:
            found = layer.op.contraction(self.graph.in_specs(layer))
            self._summed[layer.index] = (0 if found is None or layer is self.graph.layers[-1]
                                         else found.size)
        size = self._summed[layer.index]
        return size > 0 and size % count == 0

    def configs(self, layer: Layer) -> list[ParallelConfig]:
        """One configuration per degree tuple and contraction count the proposals may give
        (on the first devices): what calibration times."""
        found = []
        for degrees in self.degrees(layer):
            parts = math.prod(degrees)
            found += [ParallelConfig(degrees, tuple(range(parts * c)), contraction=c)
                      for c in [1, *self.contraction_counts(layer, parts)]]
        return found


def one_weird_trick(graph: Graph, num_devices: int) -> dict[str, ParallelConfig]:
    """Krizhevsky's expert strategy: data parallelism everywhere except dense layers (other than
    the last layer), which split their output features over as many devices as divide them."""
    strategy = data_parallel_strategy(graph, num_devices)
    for layer in graph.layers[:-1]:
        kinds = layer.op.dim_kinds(graph.in_specs(layer))
        shape = graph.tensors[layer.outputs[0]].spec.shape
        if layer.type_name != "Dense" or kinds[-1] is not DimKind.PARAMETER:
            continue
        parts = max(d for d in range(1, num_devices + 1) if shape[-1] % d == 0)
        degrees = (1,) * (len(shape) - 1) + (parts,)
        strategy[layer.name] = ParallelConfig(degrees, tuple(range(parts)))
    return strategy


def one_f_one_b_twins(graph: Graph, num_devices: int, options: SearchOptions,
                      over: dict[str, float]) -> dict[str, Strategy]:
    """The 1F1B twins of `TWINS` of the GPipe pipeline candidates over the memory limit
    (`over`: candidates over it, by name, with their simulated times), by name: the same stages
    and micro-batches, holding fewer micro-batches' activations (`pipelines.held_share`) in
    about the same time (the same bubble; on our machines' message latencies often a little
    more). Those that hold the smallest share of their micro-batches come first, the fastest
    first among equals. (Where GPipe's fits, its twin is no faster. A twin is simulated whole,
    1-2 s for GPT-2 medium on 16 devices: `Simulator.simulate`.)"""
    twins = pipeline_candidates(graph, num_devices, options.enable_recomputation, "1F1B")
    found = sorted((held_share(twins[one_f_one_b_name(name)]), time, name)
                   for name, time in over.items() if one_f_one_b_name(name) in twins)
    return {one_f_one_b_name(name): twins[one_f_one_b_name(name)]
            for _, _, name in found[:TWINS]}


def initial_candidates(graph: Graph, num_devices: int, options: SearchOptions,
                       imported: Strategy | None = None) -> dict[str, Strategy]:
    """The strategies the search starts from, by name: data parallelism, the imported strategy,
    when parameter parallelism is allowed the "one weird trick", when recomputation is
    allowed data parallelism recomputing every layer, when weight sharding is allowed data
    parallelism sharding every weighted layer's weights (and recomputing every layer, where
    that is allowed too), when pipelines are allowed the pipelines of
    `pipelines.pipeline_candidates` (what fits where data parallelism does not, if anything of
    these shapes does), and with parameter parallelism and contraction splits Megatron's
    layouts (`tensor_parallel.megatron_candidates`)."""
    candidates = {"data parallel": data_parallel_strategy(graph, num_devices)}
    if imported is not None:
        candidates["imported"] = dict(imported)
    if options.enable_parameter_parallel:
        candidates["one weird trick"] = one_weird_trick(graph, num_devices)
    if options.enable_recomputation:
        candidates["data parallel, recomputed"] = {
            name: replace(config, recompute=True)
            for name, config in candidates["data parallel"].items()}
    if options.enable_weight_sharding:
        weighted = {layer.name for layer in graph.layers
                    if any(w.trainable for w in layer.weights)}
        candidates["data parallel, sharded"] = {
            name: replace(config, shard_weights=name in weighted,
                          recompute=options.enable_recomputation)
            for name, config in candidates["data parallel"].items()}
    if options.enable_pipeline_parallel:
        candidates.update(pipeline_candidates(graph, num_devices, options.enable_recomputation))
    if options.enable_parameter_parallel and options.contraction_splits:
        candidates.update(megatron_candidates(graph, num_devices))
    return candidates


SELECTIVE = "data parallel, selectively recomputed"
TWINS = 2  # the 1F1B twins the search tries (`one_f_one_b_twins`)


def recomputation_order(graph: Graph) -> list[str]:
    """The layers whose recomputation saves the most memory per flop it costs again, first:
    what a forward keeps beyond its inputs (its kept outputs, its extra arrays; a recomputed
    layer keeps its inputs alone) over its forward flops. Layers that keep nothing beyond
    their inputs are left out."""
    scored = []
    for layer in graph.layers:
        inputs = graph.in_specs(layer)
        kept = layer.op.kept_for_backward(inputs)
        out = graph.tensors[layer.outputs[0]].spec
        saved = (sum(graph.tensors[layer.outputs[k]].spec.nbytes for k in kept.outputs)
                 + kept.extra * out.size)
        if saved > 0:
            scored.append((-saved / (layer.op.flops(inputs) + 1), layer.index, layer.name))
    return [name for _, _, name in sorted(scored)]


def selective_recomputation(graph: Graph, base: Strategy,
                            simulate: Callable[[Strategy], Simulation]) -> Strategy | None:
    """`base` with the fewest layers of `recomputation_order` recomputed that fits every
    device's memory (a bisection over how many: about log2(layers) simulations), or None
    where recomputing all of them does not fit either (selective activation checkpointing,
    as a user short of memory would choose it)."""
    order = recomputation_order(graph)

    def recomputing(count: int) -> Strategy:
        chosen = set(order[:count])
        return {name: replace(config, recompute=config.recompute or name in chosen)
                for name, config in base.items()}
    low, high = 0, len(order)
    if not order or simulate(recomputing(high)).over:
        return None
    while low < high:
        middle = (low + high) // 2
        if simulate(recomputing(middle)).over:
            low = middle + 1
        else:
            high = middle
    return recomputing(high)


def _rank(simulation: Simulation) -> tuple[bool, float]:
    """What the search keeps the best by: a strategy that fits every device's memory before
    any that does not, then the lower cost (time plus the memory penalty)."""
    return bool(simulation.over), simulation.cost


def _scored(simulate: Callable[[Strategy], Simulation], proposal: Strategy
            ) -> tuple[tuple[bool, float], float]:
    """The proposal's rank and simulated time; one whose 1F1B order cannot be kept (a layer
    after a 1F1B stage that reads several micro-batches at once:
    `pipelines.in_dependency_order`) ranks last, over the memory limit at no finite cost, so
    that it is never accepted."""
    try:
        simulation = simulate(proposal)
    except StrategyError:
        return (True, math.inf), math.inf
    return _rank(simulation), simulation.time


def _accepted(proposal: tuple[bool, float], current: tuple[bool, float], alpha: float,
              rng: random.Random) -> bool:
    """MCMC's rule between two strategies on the same side of the memory limit; from one that
    fits, never to one that does not; from one that does not, always to one that fits."""
    if proposal[0] != current[0]:
        return current[0]
    return proposal[1] < current[1] or rng.random() < math.exp(-alpha * (proposal[1] - current[1]))


@contextmanager
def collector_paused():
    """Python's cyclic garbage collector off for the duration. The simulator's caches grow to
    millions of long-lived objects, which every full collection walks; a search makes almost no
    reference cycles (a thousand proposals leave a few dozen objects), so they wait for its end."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def search(simulator: Simulator, options: SearchOptions, imported: Strategy | None = None,
           stream=None, observer: Callable[[float, float], None] | None = None
           ) -> SearchResult:
    """FlexFlow's MCMC over strategies; prints its lines to `stream`. `observer(current_ms,
    best_ms)` is called after each proposal is judged (for plots of the search)."""
    with collector_paused():
        return _search(simulator, options, imported, stream or sys.stdout, observer)


def _search(simulator: Simulator, options: SearchOptions, imported: Strategy | None, stream,
            observer: Callable[[float, float], None] | None) -> SearchResult:
    graph = simulator.graph
    space = SearchSpace(graph, simulator.num_devices, options)
    simulate: Callable[[Strategy], Simulation] = (
        simulator.simulate if options.delta else simulator.simulate_full)
    started = time.perf_counter()
    candidates = initial_candidates(graph, simulator.num_devices, options, imported)
    simulate(candidates["data parallel"])  # (its pieces in the caches every process starts with)
    with Scorers(lambda proposal: _scored(simulate, proposal),
                 [layer.name for layer in graph.layers], options.processes) as scorers:
        ranks = _scored_candidates(graph, simulator.num_devices, options, candidates,
                                   simulate, scorers)
        scores = {name: cost for name, (_, cost) in ranks.items()}
        print(f"MCMC search configuration: budget({options.budget}) "
              f"alpha({options.alpha:.8f}) mode(TRAINING)", file=stream)
        print("initial candidates: " + ", ".join(f"{name} {cost:.4f} ms"
                                                 for name, cost in scores.items()), file=stream)
        first = min(ranks, key=ranks.get)
        chain = _Chain(dict(candidates[first]), ranks[first], options)
        chain.run(space, scorers, stream, observer)
        processes = f" in {scorers.processes} processes" if scorers.processes > 1 else ""
    seconds = time.perf_counter() - started
    print(f"MCMC search: {options.budget + 1} proposals in {seconds:.2f} s{processes}; best "
          f"{chain.best_rank[1]:.4f} ms, data parallel {scores['data parallel']:.4f} ms",
          file=stream)
    return SearchResult(chain.best, chain.best_rank[1], scores, options.budget + 1, seconds)


def _scored_candidates(graph: Graph, num_devices: int, options: SearchOptions,
                       candidates: dict[str, Strategy], simulate: Callable[[Strategy], Simulation],
                       scorers: Scorers) -> dict[str, tuple[bool, float]]:
    """The ranks of the initial `candidates`, scored together by `scorers`, with the 1F1B
    twins of the pipelines over the memory limit and, where data parallelism does not fit, its
    selective recomputation (a search of its own, in this process) added to `candidates`."""
    scored = dict(zip(candidates, scorers.score_all(list(candidates.values()))))
    ranks = {name: rank for name, (rank, _) in scored.items()}
    if options.enable_pipeline_parallel:
        over = {name: seconds for name, ((is_over, _), seconds) in scored.items() if is_over}
        twins = one_f_one_b_twins(graph, num_devices, options, over)
        candidates.update(twins)
        ranks.update(zip(twins, (rank for rank, _ in scorers.score_all(list(twins.values())))))
    if options.enable_recomputation and ranks["data parallel"][0]:
        found = selective_recomputation(graph, candidates["data parallel"], simulate)
        if found is not None:
            candidates[SELECTIVE] = found
            ranks[SELECTIVE] = _rank(simulate(found))
    return ranks


class _Chain:
    """The Markov chain: the current and the best strategy, with their ranks. Proposals come
    from `SearchSpace.propose` on the seed's random stream, acceptance draws from a stream of
    their own, so that proposals can be drawn ahead of their judgement (scheduler/speculation.py)
    and drawn again where a judgement moves the chain."""

    def __init__(self, start: Strategy, rank: tuple[bool, float], options: SearchOptions):
        self.current, self.current_rank = start, rank
        self.best, self.best_rank = start, rank
        self.options = options
        self.proposals = random.Random(options.seed)
        self.acceptance = random.Random(f"acceptance {options.seed}")
        self.reset_span = min(max(options.budget // 100, 1), 1000)

    def run(self, space: SearchSpace, scorers: Scorers, stream,
            observer: Callable[[float, float], None] | None) -> None:
        """`budget + 1` proposals, drawn ahead (`_draw`), scored together and judged in order;
        those drawn after one that moves the chain are dropped and drawn again. After a move
        only as many are drawn as there are processes, then twice as many each time none
        moves it, up to `scorers.count`: a chain that moves often wastes little."""
        iteration, ahead = 0, scorers.processes
        while iteration <= self.options.budget:
            drawn = self._draw(space, iteration, ahead)
            ahead = min(2 * ahead, scorers.count)
            asked = [proposal for proposal, base, _, _ in drawn if proposal is not base]
            scored = iter(scorers.score_all(asked))
            for proposal, base, base_rank, state in drawn:
                rank = base_rank if proposal is base else next(scored)[0]
                moved = self.judge(iteration, proposal, rank, stream)
                iteration += 1
                if observer is not None:
                    observer(self.current_rank[1], self.best_rank[1])
                if moved:
                    self.proposals.setstate(state)
                    ahead = scorers.processes
                    break

    def _draw(self, space: SearchSpace, iteration: int, count: int) -> list[tuple]:
        """(proposal, the strategy it was drawn from, that one's rank, the proposals' random
        state after it) from `iteration` on, as though the chain stayed where it is, until
        `count` of them need scoring: a proposal that changes nothing is the strategy it was
        drawn from (`SearchSpace.propose`), whose rank is known."""
        drawn, asked = [], 0
        base = (self.current, self.current_rank)
        while asked < count and iteration + len(drawn) <= self.options.budget:
            if (iteration + len(drawn)) % self.reset_span == 0:
                base = (self.best, self.best_rank)
            proposal = space.propose(base[0], self.proposals)
            asked += proposal is not base[0]
            drawn.append((proposal, *base, self.proposals.getstate()))
        return drawn

    def judge(self, iteration: int, proposal: Strategy, rank: tuple[bool, float],
              stream) -> bool:
        """FlexFlow's step for one scored proposal (every `reset_span` steps the chain first
        returns to the best strategy); whether the chain moved to another strategy."""
        if iteration % self.reset_span == 0:
            self.current, self.current_rank = self.best, self.best_rank
        if iteration % 1000 == 0:
            print(f"iteration({iteration}) current_strategy({self.current_rank[1]:.4f}) "
                  f"best_strategy({self.best_rank[1]:.4f})", file=stream)
        if rank < self.best_rank:
            self.best, self.best_rank = proposal, rank
        if not _accepted(rank, self.current_rank, self.options.alpha, self.acceptance):
            return False
        moved = proposal is not self.current
        self.current, self.current_rank = proposal, rank
        return moved


def print_strategy(graph: Graph, strategy: Strategy, stream=None) -> None:
    """FlexFlow's best-strategy block; dims in FlexFlow's (reversed) order; a recomputed
    layer's line ends in " recomputed", one whose weights are sharded in " sharded weights",
    one that splits the features it sums over in " contraction(n)", one run in 1F1B's
    schedule with k micro-batches in flight in " 1f1b(k)", and one whose boxes r devices
    compute in " replicas(r)" (ours)."""
    stream = stream or sys.stdout
    print(BEST_HEADER, file=stream)
    for layer in graph.layers:
        config = strategy[layer.name]
        dims = ",".join(str(d) for d in reversed(config.degrees))
        devices = ",".join(str(d) for d in config.devices)
        print(f"[{layer.name}] num_dims({len(config.degrees)}) dims[{dims}] "
              f"device_ids[{devices}]" + (" recomputed" if config.recompute else "")
              + (" sharded weights" if config.shard_weights else "")
              + (f" contraction({config.contraction})" if config.contraction > 1 else "")
              + (f" 1f1b({config.in_flight})" if config.in_flight else "")
              + (f" replicas({config.replicas})" if config.replicas > 1 else ""),
              file=stream)
    print(BEST_FOOTER, file=stream)
