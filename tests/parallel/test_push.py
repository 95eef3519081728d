"""Devices push what they send each other (scheduler/push.py) and wait for it in mailboxes: a
device that fails must not leave the others waiting, and the run must be usable afterwards."""

import threading
import time

import numpy as np
import pytest
from distributed.protocol import deserialize, serialize, to_serialize
from distributed.protocol.cuda import cuda_deserialize, cuda_serialize

from flexflow.core import FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.ops.box import Box
from flexflow.scheduler import cluster as cluster_module
from flexflow.scheduler.actions import Receive
from flexflow.scheduler.distributed import programs
from flexflow.scheduler.fusion import fuse
from flexflow.scheduler.messages import Grad, WeightGrad
from flexflow.scheduler.parcels import Parcel
from flexflow.scheduler.push import POLL_S, Cancelled, Mailbox

from ..search.helpers import task

from .cluster import loopback_cluster
from .models import BATCH, batches, mlp, strategy, train_losses


def test_a_mailbox_hands_over_what_arrives_later_from_another_thread():
    mailbox = Mailbox()
    threading.Timer(0.05, mailbox.put, (3, "Dense_1-forward-d1e0", ["items"])).start()
    assert mailbox.take(3, "Dense_1-forward-d1e0", lambda: True) == ["items"]


@pytest.mark.parametrize("closing_first", [True, False])
def test_a_mailbox_waits_for_every_parcel_the_closing_one_counts(closing_first):
    mailbox = Mailbox()
    parcels = [(["early gradient"], None), (["the rest"], 2)]
    first, last = parcels[::-1] if closing_first else parcels
    mailbox.put(1, "a", *first)
    with pytest.raises(Cancelled):  # one of two parcels is not the delivery
        mailbox.take(1, "a", lambda: False)
    threading.Timer(0.05, mailbox.put, (1, "a", *last)).start()
    assert sorted(mailbox.take(1, "a", lambda: True)) == ["early gradient", "the rest"]


def test_a_mailbox_stops_waiting_once_its_task_is_no_longer_wanted():
    mailbox = Mailbox()
    mailbox.put(2, "a", ["for iteration 2"])  # another iteration's delivery is not the one
    wanted = threading.Event()
    wanted.set()
    threading.Timer(0.1, wanted.clear).start()
    start = time.monotonic()
    with pytest.raises(Cancelled, match="iteration 3 was cancelled .* waited for a"):
        mailbox.take(3, "a", wanted.is_set)
    assert time.monotonic() - start < 0.1 + 3 * POLL_S


def test_a_mailbox_drops_what_earlier_iterations_left():
    mailbox = Mailbox()
    mailbox.put(1, "a", ["stale"])
    mailbox.put(2, "a", ["current"])
    mailbox.drop_before(2)
    with pytest.raises(Cancelled):
        mailbox.take(1, "a", lambda: False)
    assert mailbox.take(2, "a", lambda: False) == ["current"]


def test_a_parcel_crosses_dask_s_wire_format_whole():
    items = [Grad(3, Box(((0, 4), (2, 6))), np.arange(16, dtype=np.float32).reshape(4, 4)),
             WeightGrad((1, 0, Box(((0, 8),))), np.ones(8, np.float32))]
    header, frames = serialize(to_serialize(Parcel(items)))
    assert len(frames) == 3  # one pickle, then each array's own buffer
    arrived = deserialize(header, frames).items
    assert [type(m) for m in arrived] == [Grad, WeightGrad]
    assert (arrived[0].tensor, arrived[0].box, arrived[1].key) == (3, items[0].box, items[1].key)
    for got, sent in zip(arrived, items):
        np.testing.assert_array_equal(got.array, sent.array)


class DeviceArray:
    """A GPU array as Dask's serializers see CuPy's: `__cuda_array_interface__`, and a "cuda"
    family serializer whose frame is the buffer itself (here: the object, never copied)."""

    __cuda_array_interface__ = {}

    def __init__(self, values):
        self.values = values

    def __reduce__(self):  # what pickling a CuPy array does: a copy through the host
        raise AssertionError("a device array went through host memory")


@cuda_serialize.register(DeviceArray)
def _device_frames(array):
    return {}, [array]


@cuda_deserialize.register(DeviceArray)
def _device_from_frames(header, frames):
    return frames[0]


def test_a_parcel_s_gpu_arrays_travel_as_cuda_frames_where_the_connection_carries_them():
    gpu = DeviceArray([1.0, 2.0])
    items = [Grad(3, Box(((0, 2),)), gpu),
             WeightGrad((1, 0, Box(((0, 8),))), np.ones(8, np.float32))]
    header, frames = serialize(to_serialize(Parcel(items)),
                               serializers=("cuda", "dask", "pickle"))
    assert header["serializer"] == "cuda"
    assert any(frame is gpu for frame in frames)  # the device buffer itself, not a copy
    arrived = deserialize(header, frames, deserializers=("cuda", "dask", "pickle")).items
    assert arrived[0].array is gpu and arrived[0].box == items[0].box
    np.testing.assert_array_equal(arrived[1].array, items[1].array)


def test_a_host_only_connection_pickles_a_parcel():
    header, _ = serialize(to_serialize(Parcel([WeightGrad((1, 0, Box(((0, 8),))),
                                                          np.ones(8, np.float32))])),
                          serializers=("dask", "pickle"))
    assert header["serializer"] == "pickle"


def test_each_device_s_program_lists_where_its_groups_send():
    tasks = [task("a", 0, Receive()),
             task("b", 1, Receive()),
             task("c", 0, Receive(), ("a", "b")),
             task("d", 1, Receive(), ("c",))]
    steps = programs(fuse(tasks))
    assert [(s.group.name, s.deliver_to) for s in steps[0]] == [("a-forward-d0e0", ()),
                                                                ("c-forward-d0e1", (1,))]
    assert [(s.group.name, s.deliver_to) for s in steps[1]] == [("b-forward-d1e0", (0,)),
                                                                ("d-forward-d1e2", ())]
    assert [s.position for s in steps[0] + steps[1]] == [0, 2, 1, 3]


@pytest.fixture(scope="module")
def scheduler_address():
    with loopback_cluster(workers=2) as address:
        yield address
        cluster_module.disconnect(address)


def compiled(argv, kind=None):
    ff = FFModel(FFConfig(argv=argv, batch_size=BATCH))
    inputs = mlp(ff)
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.05, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               strategy=None if kind is None else strategy(kind, ff.graph, 2))
    return ff, inputs


def in_time(fn, seconds: float):
    """`fn()`'s result or exception, failing the test if it takes longer than `seconds`."""
    outcome = {}

    def call():
        try:
            outcome["value"] = fn()
        except Exception as error:  # handed to the test below
            outcome["error"] = error
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return outcome


def test_a_device_that_fails_releases_the_devices_waiting_for_it(scheduler_address):
    """Under a parameter-parallel strategy both devices exchange activations at every layer.
    Device 1 loses its weights, so its program fails at its first kernel while device 0 waits for
    its outputs: the client gets device 1's own error promptly, and after the weights are put
    back the same model trains on (device 0's worker is not stuck), with the in-process run's
    losses."""
    reference, reference_inputs = compiled([])
    expected = train_losses(reference, reference_inputs, 2)
    ff, inputs = compiled(["--scheduler", scheduler_address, "-ll:gpu", "2"], "parameter")
    weights = {(i, k): ff.get_layer_by_id(i).get_parameter_by_id(k).get_weights(ff)
               for i in range(len(ff.graph.layers))
               for k in range(ff.get_layer_by_id(i).get_number_parameters())}
    ff.compiled.executor._call(1, lambda store: store.weights.clear())
    xs, y = batches(inputs, 1)[0]
    inputs[0].set_tensor(ff, xs[0])
    ff.label_tensor.set_tensor(ff, y)
    outcome = in_time(ff.train_step, 60)
    assert isinstance(outcome.get("error"), KeyError), outcome
    ff.compiled.executor.set_weights(weights)
    outcome = in_time(lambda: train_losses(ff, inputs, 2), 60)
    np.testing.assert_allclose(outcome["value"], expected, rtol=1e-5)


def test_an_iteration_s_programs_reach_the_scheduler_in_one_graph(scheduler_address,
                                                                   monkeypatch):
    """Submitted one by one, all programs but the first would wait out the client's batching
    interval before the scheduler saw them."""
    ff, inputs = compiled(["--scheduler", scheduler_address, "-ll:gpu", "2"], "parameter")
    client = ff.compiled.executor.client
    graphs = []
    send = client._send_to_scheduler

    def counted(message):
        if message.get("op") == "update-graph":
            graphs.append(sorted(message["keys"]))
        return send(message)
    monkeypatch.setattr(client, "_send_to_scheduler", counted)
    train_losses(ff, inputs, 1)
    assert len(graphs) == 1
    assert [key.split("-")[-3] for key in graphs[0]] == ["d0e0", "d1e0"]
