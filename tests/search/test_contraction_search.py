"""Contraction splits (Megatron's row-parallel dense layer) in the costs, the simulator and the
search: each of a box's partitions does its share of the layer's flops in its partial, whose
bytes are the output box's; on a wide MLP Megatron's pattern runs faster
than splitting both layers by output features; the delta simulation equals the full one around
contraction splits; parameter parallelism adds Megatron candidates and proposals that split
what a dense layer sums over, and nothing changes without it."""

import random

import pytest

from flexflow.scheduler.costs import partial_estimate
from flexflow.scheduler.search import SearchOptions, SearchSpace, initial_candidates, search
from flexflow.scheduler.strategy import ParallelConfig, validate
from flexflow.scheduler.taskgraph import TaskGraphBuilder
from flexflow.scheduler.tensor_parallel import dense_pairs, megatron_strategy

from ..parallel.models import MODELS
from .test_pipeline_search import assert_delta_equals_full, simulator_of, wide_deep_mlp

OPTIONS = SearchOptions(1, enable_parameter_parallel=True)


def _forwards(simulator, strategy, name):
    builder = TaskGraphBuilder(simulator.graph, simulator.objective)
    layer = next(layer for layer in simulator.graph.layers if layer.name == name)
    return [part.action for part in builder.parts(layer.index, strategy[name])]


def test_each_partition_does_its_share_of_the_flops_in_its_partial():
    """Split 2 ways: a partial has half the unsplit forward's flops, the forward only the
    activation's element-wise work, the backward half the unsplit backward's; the partial's
    bytes are the output box's."""
    simulator = simulator_of(wide_deep_mlp, 2)
    graph = simulator.graph
    second = dense_pairs(graph)[0][1]
    calls = simulator.calls
    whole = _forwards(simulator, {second.name: ParallelConfig((1, 1), (0,))}, second.name)[0]
    split = _forwards(simulator, {second.name: ParallelConfig((1, 1), (0, 1), contraction=2)},
                      second.name)
    for forward in split:
        partial = calls.op_call(forward, "forward_partial")
        assert partial.flops == pytest.approx(calls.op_call(whole, "forward").flops / 2)
        assert calls.op_call(forward, "forward").flops == forward.out_boxes[0].volume
        assert calls.op_call(forward, "backward").flops == pytest.approx(
            calls.op_call(whole, "backward").flops / 2)
        assert partial_estimate(partial) == 4 * forward.out_boxes[0].volume


def _output_split_pairs(graph, n):
    """Both layers of each dense pair split by output features over n devices (what the
    present splits could do before), data parallel elsewhere."""
    strategy = megatron_strategy(graph, n, n)
    for first, second in dense_pairs(graph):
        strategy[second.name] = ParallelConfig(strategy[first.name].degrees,
                                               tuple(range(n)))
    return strategy


def test_megatrons_pattern_runs_faster_than_output_splits():
    """A wide deep MLP on 2 devices with the collectives: one all-reduce of each pair's output
    beats gathering the hidden features and the output."""
    simulator = simulator_of(wide_deep_mlp, 2, collectives=True)
    graph = simulator.graph
    megatron, output = megatron_strategy(graph, 2, 2), _output_split_pairs(graph, 2)
    validate(graph, output, 2)
    times = [simulator.simulate(s).time for s in (megatron, output)]
    assert times[0] < times[1], times


@pytest.mark.parametrize("collectives", [False, True])
@pytest.mark.parametrize("name", ["mlp", "transformer_block"])
def test_delta_equals_full_around_contraction_splits_and_replicas(name, collectives):
    """From the Megatron candidates and Megatron-LM's whole layout (replicated layers between
    the split ones), random proposals: the delta simulation is the full one."""
    simulator = simulator_of(MODELS[name], collectives=collectives)
    graph = simulator.graph
    space = SearchSpace(graph, 4, OPTIONS)
    rng = random.Random(len(name))
    starts = [s for n, s in initial_candidates(graph, 4, OPTIONS).items() if "megatron" in n]
    starts += [megatron_strategy(graph, 4, group, replicate=True) for group in (2, 4)]
    assert_delta_equals_full(simulator, space, starts, rng, 8)


def test_parameter_parallelism_adds_megatron_candidates_and_proposals():
    simulator = simulator_of(MODELS["mlp"])
    graph = simulator.graph
    found = initial_candidates(graph, 4, OPTIONS)
    assert {"megatron, groups of 2", "megatron, groups of 4"} <= set(found)
    for name, strategy in found.items():
        validate(graph, strategy, 4)
    space = SearchSpace(graph, 4, OPTIONS)
    rng = random.Random(0)
    drawn = {layer.name: {space.random_config(layer, rng).contraction for _ in range(60)}
             for layer in graph.layers}
    assert drawn == {"Dense_100": {1, 2, 3, 4}, "Dense_101": {1, 2, 4}, "ReLU_102": {1},
                     "Dense_103": {1, 2, 4}, "Softmax_104": {1}}


def test_without_parameter_parallelism_nothing_is_contracted_and_no_coin_is_drawn():
    simulator = simulator_of(MODELS["mlp"])
    graph = simulator.graph
    options = SearchOptions(1)
    assert not any("megatron" in name for name in initial_candidates(graph, 4, options))
    space = SearchSpace(graph, 4, options)
    rng, state = random.Random(3), random.Random(3).getstate()
    assert space.contraction(graph.layers[1], 1, rng) == 1
    assert rng.getstate() == state
    assert all(config.contraction == 1 for layer in graph.layers
               for config in space.configs(layer))


def test_a_strategy_bound_for_flexflows_text_format_is_never_contracted():
    """`--export` to FlexFlow's text format, which cannot hold contraction splits or replicas:
    parameter parallelism then proposes neither, and no Megatron candidate; a .json export,
    or none, keeps them."""
    from flexflow.config import FFConfig
    from flexflow.deployment import plan_options
    simulator = simulator_of(MODELS["mlp"])
    graph = simulator.graph
    options = SearchOptions(1, enable_parameter_parallel=True, contraction_splits=False)
    assert not any("megatron" in name for name in initial_candidates(graph, 4, options))
    space = SearchSpace(graph, 4, options)
    assert all(config.contraction == 1 for layer in graph.layers
               for config in space.configs(layer))
    assert any(config.degrees[-1] > 1 for config in space.configs(graph.layers[1]))

    def splits(export):
        argv = ["--enable-parameter-parallel", "--budget", "1"] + ["--export", export] * bool(
            export)
        return plan_options(FFConfig(argv=argv)).search.contraction_splits
    assert (splits("best.txt"), splits("best"), splits("best.json"), splits("")) == (
        False, False, True, True)


def test_calibration_times_the_contraction_splits_the_proposals_may_give():
    simulator = simulator_of(MODELS["mlp"])
    space = SearchSpace(simulator.graph, 4, OPTIONS)
    second = dense_pairs(simulator.graph)[0][1]
    counts = {(config.degrees, config.contraction) for config in space.configs(second)}
    assert ((1, 1), 4) in counts and ((2, 1), 2) in counts and ((4, 1), 2) not in counts


def test_the_search_returns_a_valid_strategy_with_parameter_parallelism():
    simulator = simulator_of(wide_deep_mlp, 4, collectives=True)
    result = search(simulator, SearchOptions(200, enable_parameter_parallel=True),
                    stream=open("/dev/null", "w"))
    validate(simulator.graph, result.best, 4)
    assert result.best_cost <= min(result.candidates.values())


def test_the_best_strategy_block_marks_a_row_parallel_layer():
    import io

    from flexflow.scheduler.search import print_strategy
    simulator = simulator_of(MODELS["mlp"])
    stream = io.StringIO()
    print_strategy(simulator.graph, megatron_strategy(simulator.graph, 4, 2), stream)
    lines = stream.getvalue().splitlines()[1:-1]
    assert lines[1] == ("[Dense_101] num_dims(2) dims[1,2] device_ids[0,1,2,3] "
                        "contraction(2)")
    assert sum(line.endswith(")") and "contraction" in line for line in lines) == 1
