"""Labels and embedding indices are checked on the host as each device's piece is loaded
(scheduler/fed_checks.py), before any kernel runs; on a device the kernels then leave fed
indices alone (their check would make the host wait for the device at every step), and still
check indices computed on the device."""

import numpy as np
import pytest

from flexflow.core import DataType, FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.ops import losses, vendor
from flexflow.ops.base import Part
from flexflow.ops.embedding import Embedding
from flexflow.ops.spec import TensorSpec
from flexflow.scheduler import actions

BATCH = 4


def embedding_model(argv=()):
    ff = FFModel(FFConfig(argv=list(argv), batch_size=BATCH))
    x = ff.create_tensor([BATCH, 3], DataType.DT_INT32)
    ff.softmax(ff.dense(ff.flat(ff.embedding(x, 10, 4)), 5))
    ff.compile(optimizer=SGDOptimizer(ff, 0.1),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff, x


@pytest.fixture
def kernels(monkeypatch):
    """The (kind, layer or weight) of each forward and weight update that ran."""
    ran = []
    for direction in (actions.Forward, actions.Update):
        def run(self, store, ctx, out, original=direction.run, name=direction.__name__):
            ran.append((name, getattr(self, "layer", None)))
            return original(self, store, ctx, out)
        monkeypatch.setattr(direction, "run", run)
    return ran


@pytest.mark.parametrize("argv", [[], ["-ll:gpu", "2", "--in-process"]])
@pytest.mark.parametrize("bad", ["index", "label"])
def test_a_bad_index_or_label_is_refused_as_it_is_loaded(kernels, argv, bad):
    ff, x = embedding_model(argv)
    indices = np.zeros((BATCH, 3), np.int32)
    labels = np.zeros((BATCH, 1), np.int32)
    if bad == "index":
        indices[2, 1] = 10
    else:
        labels[3] = 5
    x.set_tensor(ff, indices)
    ff.label_tensor.set_tensor(ff, labels)
    error, message = ((IndexError, "10 is out of range for num_embeddings=10") if bad == "index"
                      else (ValueError, r"\[0, 5\), got values from 0 to 5"))
    with pytest.raises(error, match=message) as refused:
        ff.train_step()
    assert any(isinstance(entry.locals.get("self"), actions.Load) for entry in refused.traceback)
    # refused as they are loaded: no weight changed, and one device's bad indices stop it
    # before its first layer
    assert all(kind == "Forward" for kind, _ in kernels)
    assert kernels == [] or bad == "label" or argv


@pytest.fixture
def on_a_device(monkeypatch):
    """The kernels as they run on a GPU's arrays (here NumPy's, called device arrays)."""
    monkeypatch.setattr(vendor, "holds_host_arrays", lambda xp: False)


def test_on_a_device_fed_indices_are_left_to_the_load_and_computed_ones_checked(on_a_device):
    op = Embedding(7, 3)
    x = np.array([[0, 9]])
    spec = TensorSpec(x.shape, "int64")
    part = Part.whole([spec], op.infer([spec]))
    table = np.zeros((10, 3), np.float32)  # (rows enough that the lookup itself succeeds)
    op.forward(np, [x], [table], Part(part.out_boxes, part.in_boxes, part.in_shapes, fed=(True,)))
    with pytest.raises(IndexError, match="num_embeddings=7"):
        op.forward(np, [x], [table], part)


def test_on_a_device_the_loss_leaves_labels_to_the_load(on_a_device):
    """(No host read of the device's labels: a label out of range passes the kernel.)"""
    out = np.full((2, 3), 1 / 3, np.float32)
    target = losses._Target(np, out, np.array([[0], [5]]), sparse=True)
    assert list(target.indices) == [0, 5]


def test_a_batch_already_on_the_device_is_not_read_back_to_check_it():
    """A replayed graph's inputs (scheduler/graph_replay.py) were checked on the host as they
    were uploaded; Load must not read them back (on a GPU, a synchronisation inside a capture)."""
    from flexflow.ops.box import Box
    from flexflow.ops.graph import Graph
    from flexflow.scheduler.store import DeviceStore

    class OnTheDevice:
        """A batch as a device's array: sliced and taken by the array module, not NumPy's."""

        shape = (2, 3)

        def __getitem__(self, index):
            return self

        def __array__(self, dtype=None, copy=None):
            return fed

    def refuse(part):
        raise AssertionError("a device's batch was read back")
    box = Box(((0, 2), (0, 3)))
    fed = np.ones((2, 3), np.float32)
    context = actions.Context(Graph(), fed_checks={0: refuse})
    load = actions.Load(0, box)
    store = DeviceStore(0, np)
    device_batch = OnTheDevice()
    load.run(store, context.at(actions.IterationState(feeds={0: device_batch})), {})
    with pytest.raises(AssertionError, match="read back"):
        load.run(store, context.at(actions.IterationState(feeds={0: fed})), {})
