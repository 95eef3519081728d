"""Proposals scored several at once in forked processes (scheduler/speculation.py): the chain
is FlexFlow's loop as written, every proposal simulated in turn, whatever the process count;
a process's error reaches the search, and a process that dies ends the search with an error
that names it, without hanging."""

import io
import os
import random
import re

import pytest

from flexflow.scheduler import speculation
from flexflow.scheduler.search import (SearchOptions, SearchSpace, _accepted, _rank,
                                       initial_candidates, search)

from ..parallel.models import BATCH, mlp
from .helpers import compiled, small_machine
from .test_pipeline_search import simulator_of

# a temperature at which the chain moves often (alpha 0.2: +4 ms accepted 45%): the proposals
# drawn ahead are dropped many times
OPTIONS = SearchOptions(budget=400, alpha=0.2, enable_parameter_parallel=True, seed=3)

pytestmark = pytest.mark.skipif(not speculation.can_fork(), reason="needs the fork start method")


@pytest.fixture(scope="module")
def toy():
    simulator = simulator_of(mlp, machine=small_machine(devices=4, nodes=2, cores=None))
    return simulator.graph, simulator


def flexflows_loop(graph, simulator, options):
    """The (current, best) costs after each proposal of FlexFlow's loop: each proposal drawn
    from the current strategy, simulated, judged; proposals and acceptance on their streams."""
    space = SearchSpace(graph, simulator.num_devices, options)
    proposals = random.Random(options.seed)
    acceptance = random.Random(f"acceptance {options.seed}")
    ranks = {name: (_rank(simulator.simulate(s)), s) for name, s in
             initial_candidates(graph, simulator.num_devices, options).items()}
    best_rank, best = min(ranks.values(), key=lambda found: found[0])
    current_rank, current = best_rank, best
    reset_span = min(max(options.budget // 100, 1), 1000)
    trace = []
    for iteration in range(options.budget + 1):
        if iteration % reset_span == 0:
            current, current_rank = best, best_rank
        proposal = space.propose(current, proposals)
        rank = _rank(simulator.simulate(proposal))
        if rank < best_rank:
            best, best_rank = proposal, rank
        if _accepted(rank, current_rank, options.alpha, acceptance):
            current, current_rank = proposal, rank
        trace.append((current_rank[1], best_rank[1]))
    return trace


def traced(simulator, options):
    trace = []
    result = search(simulator, options, stream=io.StringIO(),
                    observer=lambda current, best: trace.append((current, best)))
    return result, trace


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_the_chain_is_flexflows_loop_whatever_the_processes(toy, processes):
    graph, simulator = toy
    expected = flexflows_loop(graph, simulator, OPTIONS)
    assert len({current for current, _ in expected}) > 10  # the chain moves: drawn ahead, dropped
    result, trace = traced(simulator, SearchOptions(**{**OPTIONS.__dict__,
                                                       "processes": processes}))
    assert trace == expected
    assert result.best_cost == expected[-1][1] == simulator.simulate(result.best).cost


def test_a_proposal_that_changes_nothing_is_the_strategy_it_came_from(toy):
    graph, simulator = toy
    space = SearchSpace(graph, 4, OPTIONS)
    current = initial_candidates(graph, 4, OPTIONS)["data parallel"]
    rng = random.Random(0)
    same = changed = 0
    for _ in range(300):
        proposal = space.propose(current, rng)
        if proposal is current:
            same += 1
        else:
            differing = [name for name in current if proposal[name] != current[name]]
            assert len(differing) == 1
            changed += 1
    assert same and changed > same


def test_the_last_line_says_how_many_processes(toy):
    _, simulator = toy
    out = io.StringIO()
    search(simulator, SearchOptions(budget=20, processes=2), stream=out)
    assert "proposals in" in out.getvalue().splitlines()[-1]
    assert " in 2 processes; best " in out.getvalue().splitlines()[-1]


def test_an_error_in_a_process_is_raised_by_the_search(toy, monkeypatch):
    _, simulator = toy
    real = simulator.simulate

    def failing_after_candidates(strategy):
        if os.getpid() != parent:
            raise ValueError("scored in a forked process")
        return real(strategy)
    parent = os.getpid()
    monkeypatch.setattr(simulator, "simulate", failing_after_candidates)
    with pytest.raises(ValueError, match="scored in a forked process"):
        search(simulator, SearchOptions(budget=50, processes=2), stream=io.StringIO())


def test_a_process_that_dies_ends_the_search_with_its_name(toy, monkeypatch):
    _, simulator = toy
    real = simulator.simulate
    parent = os.getpid()

    def dying(strategy):
        if os.getpid() != parent:
            os._exit(3)
        return real(strategy)
    monkeypatch.setattr(simulator, "simulate", dying)
    with pytest.raises(RuntimeError, match=r"search process \d+ ended without scoring its "
                                           r"proposal \(exit code 3\)"):
        search(simulator, SearchOptions(budget=50, processes=2), stream=io.StringIO())


def test_the_processes_end_with_the_search(toy, monkeypatch):
    _, simulator = toy
    started = []
    real = speculation.Scorers.__init__

    def noting(self, *args):
        real(self, *args)
        started.extend(process for process, _ in self.workers)
    monkeypatch.setattr(speculation.Scorers, "__init__", noting)
    search(simulator, SearchOptions(budget=30, processes=3), stream=io.StringIO())
    assert len(started) == 2
    assert all(process.exitcode == 0 for process in started)


def test_the_flag_sets_the_processes_and_refuses_what_is_not_a_count():
    from flexflow.core import FFConfig
    from flexflow.deployment import plan_options
    from flexflow.flags import FlagError
    assert plan_options(FFConfig(argv=["--search-processes", "4"])).search.processes == 4
    assert plan_options(FFConfig(argv=[])).search.processes == 1
    for bad in ("0", "-2", "two"):
        with pytest.raises(FlagError, match="--search-processes"):
            FFConfig(argv=["--search-processes", bad])


def test_a_script_searches_in_the_processes_its_flag_asks_for(capsys):
    compiled(mlp, BATCH, argv=("--in-process", "-ll:gpu", "2", "--budget", "20",
                               "--search-processes", "2"))
    assert re.search(r"MCMC search: 21 proposals in [\d.]+ s in 2 processes; best",
                     capsys.readouterr().out)


def test_the_initial_candidates_are_scored_in_every_process_alike(toy, monkeypatch):
    """Forked once data parallelism is simulated, the processes share the initial candidates
    (this one simulates fewer of them than there are), which score as in one process."""
    graph, simulator = toy
    options = SearchOptions(budget=0, enable_parameter_parallel=True, enable_recomputation=True,
                            enable_weight_sharding=True, enable_pipeline_parallel=True, seed=3)
    candidates = initial_candidates(graph, simulator.num_devices, options)
    assert len(candidates) >= 6
    simulated_here = []
    simulate = simulator.simulate
    monkeypatch.setattr(simulator, "simulate",
                        lambda strategy: simulated_here.append(strategy) or simulate(strategy))
    alone = search(simulator, options, stream=io.StringIO())
    assert len(simulated_here) >= len(candidates) + 1
    simulated_here.clear()
    together = search(simulator, SearchOptions(**{**options.__dict__, "processes": 2}),
                      stream=io.StringIO())
    assert together.candidates == alone.candidates and together.best_cost == alone.best_cost
    assert len(simulated_here) < len(candidates)
