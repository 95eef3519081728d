"""Fitting the executor's overheads to the probe graphs' measured times, with the simulator
itself as the model, so that calibration and prediction share one model of the scheduler."""

from __future__ import annotations

import statistics
from typing import Sequence

import numpy

from ...ops.graph import Graph
from ..machine import Overheads
from ..simulator import Simulator
from .machines import probe_machine

FIT_STEPS = 80     # Levenberg-Marquardt steps at most
FIT_DELTA = 0.25   # finite-difference step (ms)
FIT_DAMPING = 1e-2  # starting damping


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Theil-Sen line (median of pairwise slopes, median intercept): robust to outliers."""
    slope = statistics.median((ys[j] - ys[i]) / (xs[j] - xs[i])
                              for i in range(len(xs)) for j in range(i + 1, len(xs)))
    return slope, statistics.median(y - slope * x for x, y in zip(xs, ys))


def fit_overheads(graphs: dict, measured: dict, devices: int, cores: float | None,
                  action: float, bandwidth: float, start: Sequence[float]) -> list[float]:
    """(task, hop, receive, iteration, fetch, scheduler) ms that make the simulator reproduce
    the probe graphs' measured times: relative least squares, Levenberg-Marquardt from `start`
    (a step is taken only if it fits better), kept >= 0."""
    names = list(graphs)
    measured_ms = numpy.array([measured[name] for name in names])

    def predict(p):
        task, hop, receive, iteration, fetch, scheduler = p
        machine = probe_machine(devices, cores, Overheads(task, action, hop, iteration,
                                                          receive, scheduler), fetch, bandwidth)
        simulator = Simulator(Graph(), None, machine)
        return numpy.array([simulator.simulate_taskgraph(graphs[n]).time for n in names])

    def misfit(f):
        return float(numpy.sum(((measured_ms - f) / measured_ms) ** 2))

    p = numpy.maximum(numpy.array(start, float), 0.0)
    f = predict(p)
    cost, damping, jacobian = misfit(f), FIT_DAMPING, None
    for _ in range(FIT_STEPS):
        if jacobian is None:
            jacobian = numpy.column_stack([(predict(p + FIT_DELTA * e) - f) / FIT_DELTA
                                           for e in numpy.eye(len(p))]) / measured_ms[:, None]
        step = _bounded_step(jacobian, (measured_ms - f) / measured_ms, damping, p)
        candidate = numpy.maximum(p + step, 0.0)
        f_candidate = predict(candidate)
        if misfit(f_candidate) < cost:
            moved = numpy.abs(candidate - p).max()
            p, f, cost, jacobian = candidate, f_candidate, misfit(f_candidate), None
            damping /= 3
            if moved < 1e-3:
                break
        else:
            damping *= 4
    return [float(v) for v in p]


def _bounded_step(jacobian, residual, damping: float, p):
    """A damped Gauss-Newton step that leaves alone the parameters at 0 it would push below 0
    (clipping them afterwards would spoil the step of the parameters they trade off with)."""
    free = numpy.ones(len(p), bool)
    while True:
        j = jacobian[:, free]
        normal = j.T @ j
        step = numpy.zeros(len(p))
        step[free] = numpy.linalg.lstsq(  # lstsq: a parameter the probes cannot tell apart
            normal + damping * numpy.diag(numpy.diag(normal) + 1e-9),  # moves 0
            j.T @ residual, rcond=None)[0]
        blocked = free & (p <= 0) & (step < 0)
        if not blocked.any():
            return step
        free &= ~blocked
