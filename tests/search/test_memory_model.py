"""The memory model (scheduler/memory.py) on a network small enough to work out by hand, and its
peak against what the executor's devices hold as they run."""

from __future__ import annotations

import numpy as np
import pytest

from flexflow.core import ActiMode, DataType, FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.deployment import update_rule
from flexflow.scheduler import executor as executor_module
from flexflow.scheduler.memory import MemoryModel, as_rows, peak
from flexflow.scheduler.planner import memory_needed
from flexflow.scheduler.strategy import ParallelConfig, data_parallel_strategy

B, IN, HIDDEN, CLASSES = 8, 32, 64, 10


def mlp(argv=(), batch=B, hidden=HIDDEN, strategy=None):
    """input -> dense(relu) -> dense -> softmax, SGD with momentum; `strategy(graph)` gives
    the compile strategy, if any."""
    ff = FFModel(FFConfig(argv=list(argv), batch_size=batch))
    x = ff.create_tensor([batch, IN], DataType.DT_FLOAT)
    ff.softmax(ff.dense(ff.dense(x, hidden, ActiMode.AC_MODE_RELU), CLASSES))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.1, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               strategy=None if strategy is None else strategy(ff.graph))
    rng = np.random.default_rng(0)
    x.set_tensor(ff, rng.standard_normal((batch, IN)).astype(np.float32))
    ff.label_tensor.set_tensor(ff, rng.integers(0, CLASSES, (batch, 1)).astype(np.int32))
    return ff


def test_each_array_is_an_interval_from_its_task_to_its_last_use():
    ff = mlp()
    model = MemoryModel(ff.graph, ff.compiled.objective)
    taskgraph = ff.compiled.executor.taskgraph
    # positions: dense1 0, dense2 1, softmax 2, the loss 3, their backward 4, 5, 6; the end 7
    f32 = 4
    expected = {
        (0, 0, 6, B * IN * f32),           # the batch: kept by dense1 for its backward
        (0, 0, 7, B * 1 * 4),              # the label (int32), read by the loss only
        (0, 0, 6, B * HIDDEN * f32),       # dense1's ReLU output: kept by dense1 and dense2
        (0, 1, 2, B * CLASSES * f32),      # dense2's output: the softmax's input, not kept
        (0, 2, 7, B * CLASSES * f32),      # the softmax's output: the model's output
        (0, 3, 5, B * CLASSES * f32),      # the loss's gradient, read by dense2's backward
        (0, 5, 6, B * HIDDEN * f32),       # dense2's backward: the gradient of its input
    }
    assert sorted(model.intervals(taskgraph.tasks)) == sorted(expected)
    kernel, bias = IN * HIDDEN * f32, HIDDEN * f32
    kernel2, bias2 = HIDDEN * CLASSES * f32, CLASSES * f32
    assert sorted(model.gradient_intervals(taskgraph.weight_devices)) == sorted(
        [(0, 6, 7, kernel), (0, 6, 7, bias), (0, 5, 7, kernel2), (0, 5, 7, bias2)])


def hidden_split_by_parameter(graph):
    """dense1's outputs split by feature over 2 devices, the rest by sample."""
    strategy = data_parallel_strategy(graph, 2)
    strategy[graph.layers[0].name] = ParallelConfig((1, 2), (0, 1))
    return strategy


def test_a_read_of_pieces_made_elsewhere_is_a_new_array_and_the_pieces_sent_in_are_dropped():
    """dense2 (split by sample) reads all of the hidden features of its samples, which dense1
    made half on each device: the read assembles them into a new array, which dense2 keeps to
    its backward; the half sent in for that read is then dropped after dense2's forward, while
    the pieces dense1 made (kept by its ReLU) stay to dense1's backward."""
    ff = mlp(["-ll:gpu", "2", "--in-process"], strategy=hidden_split_by_parameter)
    model = MemoryModel(ff.graph, ff.compiled.objective)
    made = model.intervals(ff.compiled.executor.taskgraph.tasks)
    f32, rows = 4, B // 2
    for device in (0, 1):
        mine = [interval for interval in made if interval[0] == device]
        assert (device, 1, 5, rows * HIDDEN * f32) in mine  # the assembled copy
        assert (device, 0, 6, rows * HIDDEN // 2 * f32) in mine  # the half sent in
        assert (device, 2, 6, -rows * HIDDEN // 2 * f32) in mine  # ... dropped after dense2
        assert (device, 0, 6, B * HIDDEN // 2 * f32) in mine  # dense1's own half, kept


def test_the_peak_is_the_largest_sum_over_positions():
    rows = as_rows([(0, 0, 2, 10), (0, 1, 1, 5), (0, 2, 3, 7), (1, 0, 0, 3)])
    assert peak([rows], 2, 4) == [17, 3]  # device 0: 10 + 7 at position 2 beats 10 + 5 at 1
    assert peak([], 2, 4) == [0, 0]


@pytest.mark.parametrize("hidden", [256, 2048])
def test_the_predicted_peak_is_what_the_store_holds_at_its_fullest(monkeypatch, hidden):
    """The bytes of every array the device's store refers to (weights, optimizer state,
    gradients, values, what forwards keep), added up after every task, against the model."""
    ff = mlp(batch=64, hidden=hidden)
    assert predicted_peaks(ff) == pytest.approx(held_peaks(ff, monkeypatch), rel=0.02)


def predicted_peaks(ff) -> list[int]:
    executor = ff.compiled.executor
    return memory_needed(ff.graph, executor.taskgraph, executor.num_devices,
                         ff.compiled.objective, update_rule(ff.optimizer))


def held_peaks(ff, monkeypatch, inside_backward: bool = False) -> list[int]:
    """Per device, the most bytes its store referred to after a task of a training step (the
    second: the first makes the optimizer state), with what a backward popped still counted;
    with `inside_backward` also inside each backward once its kernels have made the gradients
    (where what a recomputed forward made again is held, with the gradients it gives)."""
    held = [0] * ff.compiled.executor.num_devices
    current = {}
    if inside_backward:
        for layer in ff.graph.layers:
            def counted(xp, dys, saved, part, backward=layer.op.backward):
                grads = backward(xp, dys, saved, part)
                if "store" in current:
                    store = current["store"]
                    held[store.device] = max(held[store.device],
                                             _bytes_held(store, saved, dys, grads))
                return grads
            object.__setattr__(layer.op, "backward", counted)  # (this model's frozen ops)

    def run_and_count(ctx, store, group, *args, **kwargs):
        out, current["store"] = {}, store
        for index, task in enumerate(group.tasks):
            popped = store.saved.get((getattr(task.action, "layer", None),
                                      getattr(task.action, "part", None)))
            task.action.run(store, ctx, out)
            held[store.device] = max(held[store.device], _bytes_held(store, popped))
            if group.releases and group.releases[index]:
                executor_module.release(store, group.releases[index])
        return out
    ff.train_step()
    with monkeypatch.context() as patch:
        patch.setattr(executor_module, "run_tasks", run_and_count)
        ff.train_step()
    return held


def _bytes_held(store, *also) -> int:
    """Bytes of the distinct arrays a store refers to, views counted once by their base."""
    found = {}

    def add(value):
        if isinstance(value, np.ndarray):  # keyed by address, as torch's tensors are
            root = value.base if isinstance(value.base, np.ndarray) else value
            found[root.__array_interface__["data"][0]] = root.nbytes
        elif hasattr(value, "numpy") and hasattr(value, "untyped_storage"):
            found[value.untyped_storage().data_ptr()] = value.untyped_storage().nbytes()
        elif isinstance(value, (tuple, list)):
            for item in value:
                add(item)
        elif isinstance(value, dict):
            for item in value.values():
                add(item)
        elif hasattr(value, "__dataclass_fields__"):
            for name in value.__dataclass_fields__:
                add(getattr(value, name))
    for part in (store.weights, store.weight_grads, store.opt_state, store.values,
                 store.grads, store.received_grads, store.saved, store.shards,
                 store.gathering, _launched(store), also):
        add(part)
    return sum(found.values())


def _launched(store) -> list:
    """What the device launched into collectives of this process (scheduler/collectives.py's
    LocalHub) that are not done: a bucket's copy of its gradients is held there, not in the
    store."""
    hub = getattr(store.communicator, "hub", None)
    if hub is None:
        return []
    return [entry.arrays[store.device] for entry in hub._pending.values()
            if store.device in entry.arrays and store.device not in entry.taken]
