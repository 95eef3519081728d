"""CUDA-graph replay of in-process steps (scheduler/graph_replay.py), its logic on CPUs: a
stand-in for CUDA graphs whose launch runs the captured step again, so that what the replayer
decides (when to capture, the batch copied into the graph's inputs and checked on the host,
graphs dropped when the host writes the state, a graph that does not give a plain step's numbers
refused) is checked against plain steps. That a real graph replays what it captured is checked
on a GPU (bench/gpu_check.py)."""

import numpy as np
import pytest

from flexflow import deployment
from flexflow.core import (AdamOptimizer, DataType, FFConfig, FFModel, LossType,
                           SGDOptimizer)
from flexflow.scheduler import graph_replay
from flexflow.scheduler.graph_replay import Replayer

BATCH = 8


class FakeGraphs:
    """Capture keeps the step (nothing runs); a launch runs it again (`perturb` then changes
    the result, as a graph that replays wrongly would; `fails` makes capture raise)."""

    def __init__(self, perturb=None, fails=False):
        self.captures = self.launches = 0
        self.perturb, self.fails = perturb, fails

    def capture(self, step):
        if self.fails:
            raise RuntimeError("operation not permitted when stream is capturing")
        self.captures += 1
        return step, None

    def launch(self, graph, records):
        self.launches += 1
        records = graph()
        if self.perturb is not None:
            self.perturb()
        return records


def model(monkeypatch, backend, optimizer=SGDOptimizer, argv=()):
    """An MLP on one device whose executor replays through `backend` (None: plain steps)."""
    if backend is not None:
        monkeypatch.setattr(deployment, "_replayer", lambda *args: Replayer(backend))
    ff = FFModel(FFConfig(argv=list(argv), batch_size=BATCH))
    x = ff.create_tensor([BATCH, 6])
    ff.softmax(ff.dense(ff.relu(ff.dense(x, 16, name="hidden")), 3))
    ff.compile(optimizer=optimizer(ff, 0.1),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    monkeypatch.undo()
    return ff, x


def train(ff, x, steps=5, labels=None):
    rng = np.random.default_rng(1)
    losses = []
    for step in range(steps):
        x.set_tensor(ff, rng.standard_normal((BATCH, 6)).astype(np.float32))
        ff.label_tensor.set_tensor(ff, labels if labels is not None else
                                   rng.integers(0, 3, (BATCH, 1)).astype(np.int32))
        losses.append(ff.train_step())
    return losses, hidden_kernel(ff)


def hidden_kernel(ff):
    return ff.get_layer_by_name("hidden").get_weight_tensor().get_tensor(ff)


def test_replayed_steps_train_as_plain_steps(monkeypatch):
    backend = FakeGraphs()
    replayed = train(*model(monkeypatch, backend))
    plain = train(*model(monkeypatch, None))
    assert replayed[0] == plain[0]
    np.testing.assert_array_equal(replayed[1], plain[1])
    # step 1 plain (the state is made), step 2 captured and checked, steps 3-5 launched
    assert (backend.captures, backend.launches) == (1, 4)


def test_a_write_of_the_weights_drops_the_graph(monkeypatch):
    backend = FakeGraphs()
    ff, x = model(monkeypatch, backend)
    train(ff, x, steps=3)
    tensor = ff.get_layer_by_name("hidden").get_weight_tensor()
    tensor.set_tensor(ff, np.zeros_like(hidden_kernel(ff)))
    train(ff, x, steps=2)
    assert backend.captures == 2


@pytest.mark.parametrize("how", ["wrong numbers", "capture fails"])
def test_a_graph_unlike_the_plain_step_is_refused_and_the_plain_step_stands(monkeypatch, how):
    backend = FakeGraphs(fails=how == "capture fails")
    ff, x = model(monkeypatch, backend)
    if how == "wrong numbers":
        kernel = next(a for a in ff.compiled.executor.stores[0].weights.values() if a.ndim == 2)
        backend.perturb = lambda: kernel.__setitem__((0, 0), kernel[0, 0] + 1e-3)
    with pytest.warns(RuntimeWarning, match="CUDA-graph replay is off for this model"):
        replayed = train(ff, x)
    plain = train(*model(monkeypatch, None))
    assert replayed[0] == plain[0]
    np.testing.assert_array_equal(replayed[1], plain[1])
    assert backend.launches <= 1  # (the check's), none after


def test_a_replayed_step_checks_its_labels_on_the_host(monkeypatch):
    ff, x = model(monkeypatch, FakeGraphs())
    train(ff, x, steps=3)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        train(ff, x, steps=1, labels=np.full((BATCH, 1), 3, np.int32))


def test_what_cannot_be_replayed_says_why(monkeypatch):
    from flexflow.ops import vendor
    from flexflow.ops.optimizers import Adam

    def graph_of(build):
        ff = FFModel(FFConfig(argv=[], batch_size=BATCH))
        build(ff, ff.create_tensor([BATCH, 6], DataType.DT_FLOAT))
        return ff.graph
    plain = graph_of(lambda ff, x: ff.dense(x, 3))
    dropped = graph_of(lambda ff, x: ff.dropout(ff.dense(x, 3), 0.5))
    reason = graph_replay.reason_not_to_replay
    assert reason(plain, 1, np, None) == "not the vendor kernels on a GPU"
    monkeypatch.setattr(vendor, "holds_host_arrays", lambda xp: False)  # (as on a GPU)
    assert reason(plain, 1, np, None) is None
    assert reason(plain, 2, np, None) == "more than one device"
    assert reason(dropped, 1, np, None) == "a random operator"
    assert "Adam" in reason(plain, 1, np, Adam())


@pytest.mark.parametrize("flag", ["auto", "off"])
def test_the_flag_turns_replay_off(monkeypatch, flag):
    monkeypatch.setattr(deployment, "reason_not_to_replay", lambda *args: None)
    ff, _ = model(monkeypatch, None, argv=["--cuda-graphs", flag])
    assert (ff.compiled.executor.replayer is not None) == (flag == "auto")


def test_adam_s_steps_run_plain(monkeypatch):
    backend = FakeGraphs()
    train(*model(monkeypatch, backend, optimizer=AdamOptimizer))
    assert backend.captures == 0
