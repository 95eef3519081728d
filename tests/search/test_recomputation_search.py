"""Recomputation in the simulator and the search: a recomputed layer's backward costs its
forward again; under a memory limit that only recomputation meets, a search allowed to
recompute returns a strategy that fits; a seed's proposals are unchanged where it is not
allowed; the flag reaches the search."""

from dataclasses import replace

import pytest

from flexflow.core import FFConfig
from flexflow.scheduler import actions as A
from flexflow.scheduler.search import SearchOptions, search
from flexflow.scheduler.simulator import Simulator
from flexflow.scheduler.strategy import data_parallel_strategy

from ..parallel.models import BATCH, MODELS
from .helpers import compiled, small_machine


def recomputing(strategy, names=None):
    return {name: replace(config, recompute=names is None or name in names)
            for name, config in strategy.items()}


def simulator_of(name, machine=None):
    ff, objective = compiled(MODELS[name], BATCH)
    return Simulator(ff.graph, objective, machine or small_machine(1, 1), ff.compiled.loss,
                     ff.optimizer.rule())


def test_a_recomputed_layer_costs_its_forward_again():
    """On one device every task runs after the last: recomputing every layer adds each
    forward's kernel time to the iteration, no more."""
    simulator = simulator_of("transformer_block")
    plain = data_parallel_strategy(simulator.graph, 1)
    again = simulator.simulate_full(recomputing(plain))
    action = simulator.machine.overheads.action  # the task's, which the backward already has
    plans = simulator.simulate_full(plain).plans
    backed = {task.action.layer for p in plans for task in p.tasks
              if isinstance(task.action, A.Backward)}  # (the loss takes softmax's backward)
    forwards = [p.task_ms[i] - action for p in plans for i, task in enumerate(p.tasks)
                if isinstance(task.action, A.Forward) and task.action.layer in backed]
    assert again.time == pytest.approx(simulator.simulate_full(plain).time + sum(forwards))


def test_under_a_limit_only_recomputation_meets_the_search_recomputes_and_fits():
    plain_sim = simulator_of("transformer_block")
    plain = data_parallel_strategy(plain_sim.graph, 1)
    held, recomputed = (plain_sim.simulate_full(s).memory[0]
                        for s in (plain, recomputing(plain)))
    assert recomputed < held
    machine = small_machine(1, 1)
    kind = next(iter(machine.kinds.values()))
    machine.kinds = {name: replace(kind, memory=(held + recomputed) // 2)
                     for name in machine.kinds}
    simulator = simulator_of("transformer_block", machine)
    assert simulator.simulate(plain).over
    allowed = search(simulator, SearchOptions(200, enable_recomputation=True),
                     stream=open("/dev/null", "w"))
    assert not simulator.simulate_full(allowed.best).over
    assert any(config.recompute for config in allowed.best.values())
    refused = search(simulator, SearchOptions(200), stream=open("/dev/null", "w"))
    assert not any(config.recompute for config in refused.best.values())
    assert simulator.simulate_full(refused.best).over


def test_the_flag_reaches_the_search():
    from flexflow.deployment import plan_options
    assert plan_options(FFConfig(argv=["--enable-recomputation"])).search.enable_recomputation
    assert not plan_options(FFConfig(argv=[])).search.enable_recomputation


def test_the_best_strategy_block_marks_a_recomputed_layer():
    import io

    from flexflow.scheduler.search import print_strategy
    simulator = simulator_of("mlp")
    strategy = data_parallel_strategy(simulator.graph, 1)
    first = simulator.graph.layers[0].name
    stream = io.StringIO()
    print_strategy(simulator.graph, recomputing(strategy, {first}), stream)
    lines = stream.getvalue().splitlines()[1:-1]
    assert lines[0].startswith(f"[{first}]") and lines[0].endswith(" recomputed")
    assert not any(line.endswith("recomputed") for line in lines[1:])


def test_layers_are_ordered_by_what_recomputing_saves_per_flop():
    """transformer_block: the layers that keep more than their inputs, by bytes kept per flop
    of their forward, most first; the dense layer without an activation (nothing kept beyond
    its input) left out."""
    from flexflow.scheduler.search import recomputation_order
    graph = simulator_of("transformer_block").graph
    order = recomputation_order(graph)
    layers = {layer.name: layer for layer in graph.layers}

    def per_flop(name):
        layer = layers[name]
        inputs = graph.in_specs(layer)
        kept = layer.op.kept_for_backward(inputs)
        out = graph.tensors[layer.outputs[0]].spec
        saved = sum(graph.tensors[layer.outputs[k]].spec.nbytes for k in kept.outputs)
        return (saved + kept.extra * out.size) / (layer.op.flops(inputs) + 1)
    ratios = [per_flop(name) for name in order]
    assert ratios == sorted(ratios, reverse=True) and ratios[-1] > 0
    assert [layers[n].type_name for n in order] == [
        "Softmax", "LayerNorm", "LayerNorm", "Dense", "MultiHeadAttention"]
    assert layers[order[3]].op.activation == "gelu"
    assert len([n for n in layers if layers[n].type_name == "Dense"]) == 3


def test_selective_recomputation_recomputes_the_fewest_layers_that_fit():
    """Under a limit between data parallelism's memory and that of recomputing every layer of
    the order: the candidate fits, and recomputing one layer fewer of the order does not; the
    search starts from it."""
    from flexflow.scheduler.search import (SELECTIVE, recomputation_order,
                                           selective_recomputation)
    plain_sim = simulator_of("transformer_block")
    graph = plain_sim.graph
    plain = data_parallel_strategy(graph, 1)
    order = recomputation_order(graph)
    held, least = (plain_sim.simulate_full(s).memory[0]
                   for s in (plain, recomputing(plain, set(order))))
    machine = small_machine(1, 1)
    kind = next(iter(machine.kinds.values()))
    machine.kinds = {name: replace(kind, memory=(held + least) // 2) for name in machine.kinds}
    simulator = simulator_of("transformer_block", machine)
    found = selective_recomputation(graph, plain, simulator.simulate)
    chosen = [name for name, config in found.items() if config.recompute]
    assert set(chosen) == set(order[:len(chosen)]) and 0 < len(chosen) <= len(order)
    assert not simulator.simulate(found).over
    assert simulator.simulate(recomputing(plain, set(order[:len(chosen) - 1]))).over
    result = search(simulator, SearchOptions(5, enable_recomputation=True),
                    stream=open("/dev/null", "w"))
    assert SELECTIVE in result.candidates
    assert SELECTIVE not in search(plain_sim, SearchOptions(5, enable_recomputation=True),
                                   stream=open("/dev/null", "w")).candidates
