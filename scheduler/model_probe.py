"""A tiny real model trained data parallel: the calibration probe that is a real iteration.

The scheduler probes (calibration/probes.py) are fused groups of probe actions, and the
executor's overheads are fitted to them. A real iteration also ships its input batches with the
programs, runs the loss on every device (each program then returns metric sums), and sums,
applies and spreads weight gradients with the real actions, which the fitted overheads leave
out (docs/calibration.md). This probe measures that gap on a model whose kernels take next to
nothing (a 4-wide dense layer and a softmax, two samples per device), so what it adds to the
per-iteration overhead is the machinery's, not a kernel's.
"""

from __future__ import annotations

import numpy

from ..ops.dense import Dense
from ..ops.graph import Graph
from ..ops.losses import Loss
from ..ops.optimizers import SGD
from ..ops.softmax import Softmax
from ..ops.spec import TensorSpec
from .actions import Context, IterationState
from .strategy import data_parallel_strategy
from .taskgraph import Objective, build_task_graph

WIDTH = 4              # features and classes
SAMPLES_PER_DEVICE = 2
LEARNING_RATE = 0.01


class ModelProbe:
    """The model, its data-parallel task graph over `devices`, a batch and weights."""

    def __init__(self, devices: int):
        batch = SAMPLES_PER_DEVICE * devices
        self.graph = Graph()
        x = self.graph.add_input(TensorSpec((batch, WIDTH))).id
        hidden = self.graph.add_layer(Dense(WIDTH), [x]).outputs[0]
        out = self.graph.add_layer(Softmax(-1), [hidden]).outputs[0]
        label = self.graph.add_label(TensorSpec((batch, 1), "int32")).id
        self.objective = Objective(out, label, through_softmax=True)
        self.taskgraph = build_task_graph(self.graph, data_parallel_strategy(self.graph, devices),
                                          devices, self.objective)
        self.loss = Loss(kind="sparse_categorical_crossentropy", metrics=(), batch_size=batch,
                         sample_size=WIDTH, through_softmax=True)
        self.optimizer = SGD(lr=LEARNING_RATE)
        rng = numpy.random.default_rng(0)
        self.feeds = {x: rng.standard_normal((batch, WIDTH)).astype(numpy.float32),
                      label: rng.integers(0, WIDTH, (batch, 1)).astype(numpy.int32)}

    def context(self) -> Context:
        return Context(self.graph, self.loss)

    def start(self, executor) -> None:
        """Give `executor` (built on `taskgraph` and `context()`) the model's weights."""
        executor.set_weights({(layer.index, k): numpy.full(spec.shape, 0.1, numpy.float32)
                              for layer in self.graph.layers
                              for k, spec in enumerate(layer.weights)})

    def step(self, executor) -> list:
        """One training iteration; returns its metric records."""
        return executor.run(*self.taskgraph.phases, zero_gradients=True,
                            state=IterationState(self.feeds, optimizer=self.optimizer))

    def simulated_ms(self, machine) -> float:
        from .simulator import Simulator
        simulator = Simulator(self.graph, self.objective, machine, self.loss, self.optimizer)
        return simulator.simulate_taskgraph(self.taskgraph).time
