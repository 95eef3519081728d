"""Speculative MCMC: the search's proposals scored several at once, in forked processes.

A proposal is drawn from the chain's current strategy, and that changes only where an accepted
proposal differs from it: rarely (none of the 1,001 proposals of ResNet-101's or Inception-v3's
search at budget 1,000 on `p100-4x4`; a proposal drawing its layer's own configuration is
accepted and changes nothing). So the search draws the next proposals as though the chain
stayed where it is, has them scored together, and judges them in order; past the first one that
moves the chain the scores are dropped and the proposals drawn again from there, the proposals'
random stream rewound to it (`search._Chain`). The chain is the one-process chain exactly,
whatever the number of processes.

The other processes are forked from the searching one once it has simulated data parallelism,
so they start with its simulator's caches, and score the initial candidates with it; each keeps
its own caches from there. Where the fork start method does not exist (Windows), the search
scores its proposals alone.
"""

from __future__ import annotations

import multiprocessing
import pickle
import signal
from collections import deque
from typing import Callable, Iterator, Sequence

from .strategy import ParallelConfig, Strategy

Score = tuple  # what the search scores a strategy by (`search._scored`: its rank and time)
AHEAD = 4  # proposals drawn ahead a process at most (`Scorers.count`; fewer after a move)
QUEUED = 2  # proposals a forked process has at a time: it never waits for the next


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


class Scorers:
    """`score` run in this process and in `processes - 1` forked ones (a context manager: the
    forked ones end with it). A strategy travels as its configurations in `names`' order."""

    def __init__(self, score: Callable[[Strategy], Score], names: Sequence[str],
                 processes: int):
        self.score, self.names = score, tuple(names)
        self.workers: list[tuple[multiprocessing.Process, object]] = []
        if processes > 1 and can_fork():
            context = multiprocessing.get_context("fork")
            for _ in range(processes - 1):
                here, there = context.Pipe()
                ours = [pipe for _, pipe in self.workers] + [here]  # (the fork copies them)
                process = context.Process(target=_serve, args=(there, ours, score, self.names),
                                          daemon=True, name="flexflow-search")
                process.start()
                there.close()  # so that a process that dies reads as the end of its pipe
                self.workers.append((process, here))

    @property
    def processes(self) -> int:
        return 1 + len(self.workers)

    @property
    def count(self) -> int:
        """How many proposals `score_all` is best given at once: `AHEAD` a process, or one
        where this process scores alone (nothing is then drawn ahead for a move to waste)."""
        return AHEAD * (1 + len(self.workers)) if self.workers else 1

    def score_all(self, proposals: Sequence[Strategy]) -> list[Score]:
        """The scores of `proposals`. Each forked process has `QUEUED` of them handed out at a
        time, the next as soon as one is scored; this process scores the next one not handed
        out, meanwhile; then it waits for the forked ones' last answers."""
        scores: list[Score | None] = [None] * len(proposals)
        order = iter(range(len(proposals)))
        handed: dict[object, tuple] = {}  # pipe -> (its process, the proposals it has)
        for process, pipe in self.workers:
            handed[pipe] = (process, deque())
            self._hand_out(process, pipe, handed[pipe][1], order, proposals)
        for i in order:  # (the hand-outs below take from the same iterator)
            scores[i] = self.score(proposals[i])
            for pipe, (process, queue) in handed.items():
                while queue and pipe.poll():
                    scores[queue.popleft()] = _received(process, pipe)
                self._hand_out(process, pipe, queue, order, proposals)
        for pipe, (process, queue) in handed.items():
            while queue:
                scores[queue.popleft()] = _received(process, pipe)
        return scores

    def _hand_out(self, process, pipe, queue: deque, order: Iterator[int],
                  proposals: Sequence[Strategy]) -> None:
        """Send a forked process proposals until it has `QUEUED` (a strategy is about 20 kB
        for 300 layers: the pipe's buffer holds them, so sending never waits)."""
        while len(queue) < QUEUED:
            i = next(order, None)
            if i is None:
                return
            try:
                pipe.send(tuple(proposals[i][name] for name in self.names))
            except OSError:  # (it died: its pipe is broken)
                raise _died(process) from None
            queue.append(i)

    def close(self) -> None:
        for process, pipe in self.workers:
            pipe.close()
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()
        self.workers = []

    def __enter__(self) -> "Scorers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _received(process, pipe) -> Score:
    """A forked process's answer; its error raised here, as the one-process search would."""
    try:
        kind, value = pipe.recv()
    except (EOFError, OSError):  # (it died: its pipe closed, or broken)
        raise _died(process) from None
    if kind == "error":
        raise value
    return value


def _died(process) -> RuntimeError:
    process.join(timeout=5)
    return RuntimeError(f"search process {process.pid} ended without scoring its proposal "
                        f"(exit code {process.exitcode})")


def _serve(pipe, ours: list, score: Callable[[Strategy], Score], names: tuple[str, ...]
           ) -> None:
    """A forked process: score each strategy it is sent until its pipe closes (`ours`, the
    searching process's ends of the pipes, closed here, so that closing them there, or that
    process's death, ends this one). Equal configurations are kept as one object, as the
    searching process's proposals share them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the searching process's to handle
    for end in ours:
        end.close()
    interned: dict[ParallelConfig, ParallelConfig] = {}
    while True:
        try:
            configs = pipe.recv()
        except EOFError:
            return
        strategy = {name: interned.setdefault(config, config)
                    for name, config in zip(names, configs)}
        try:
            answer = ("score", score(strategy))
        except Exception as error:  # noqa: BLE001 (raised again in the searching process)
            answer = ("error", error if _picklable(error) else RuntimeError(repr(error)))
        pipe.send(answer)


def _picklable(error: Exception) -> bool:
    try:
        pickle.dumps(error)
    except Exception:  # noqa: BLE001 (any failure to pickle means: send its repr instead)
        return False
    return True
