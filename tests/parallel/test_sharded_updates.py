"""Sharded weight updates (scheduler/shards.py): under data parallelism on k devices each weight
box is cut into k shards, and each device sums the gradient of, updates and keeps the optimizer
state of its own shard only; the trained weights and optimizer state are the single device's,
and a restored state puts each shard's slice of the optimizer state on its owner."""

from collections import Counter

import numpy as np
import pytest

from flexflow.core import (ActiMode, AdamOptimizer, DataType, FFConfig, FFModel, LossType,
                           SGDOptimizer)
from flexflow.ops.box import Box
from flexflow.scheduler import actions as A
from flexflow.scheduler.shards import Shard, shards
from flexflow.scheduler.memory import weight_memory
from flexflow.scheduler.strategy import data_parallel_strategy

from .models import BATCH, classify, concat_cnn, train_losses

OPTIMIZERS = {"sgd": lambda ff: SGDOptimizer(ff, lr=0.05, momentum=0.9),
              "adam": lambda ff: AdamOptimizer(ff, alpha=0.01)}
STEPS = 4


def narrow_mlp(ff):
    """A dense layer of 3 units: on 4 devices its kernel (3, 12) is cut along its second dim,
    shards that are not contiguous in memory, and its bias is too short to cut."""
    x = ff.create_tensor([BATCH, 12], DataType.DT_FLOAT)
    return classify(ff, ff.dense(x, 3, ActiMode.AC_MODE_RELU), [x])


def compiled(devices: int, optimizer: str = "sgd", build=concat_cnn):
    """A model (by default a CNN: convolutions, a concatenation, pooling, dense), data parallel
    on `devices`."""
    ff = FFModel(FFConfig(argv=["-ll:gpu", str(devices), "--in-process"], batch_size=BATCH))
    inputs = build(ff)
    ff.compile(optimizer=OPTIMIZERS[optimizer](ff),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               strategy=data_parallel_strategy(ff.graph, devices))
    return ff, inputs


def trained(devices: int, optimizer: str = "sgd", steps: int = STEPS, build=concat_cnn):
    ff, inputs = compiled(devices, optimizer, build)
    losses = train_losses(ff, inputs, steps)
    return ff, losses, ff.compiled.capture()


def trainable_boxes(ff) -> list:
    return [key for key in ff.compiled.executor.taskgraph.weight_devices
            if ff.graph.layers[key[0]].weights[key[1]].trainable]


def test_a_box_is_cut_along_its_first_long_enough_dim_as_evenly_as_possible():
    box = Box(((0, 3), (4, 14)))  # a box of a weight split elsewhere: its own coordinates
    assert shards(box, [2, 0, 1]) == (Shard(Box(((0, 1), (4, 14))), 2),
                                      Shard(Box(((1, 2), (4, 14))), 0),
                                      Shard(Box(((2, 3), (4, 14))), 1))
    assert [s.box.bounds[1] for s in shards(box, [0, 1, 2, 3])] == [(4, 7), (7, 10), (10, 12),
                                                                   (12, 14)]
    assert shards(box, [1]) == (Shard(box, 1),)
    small = Box(((0, 3), (0, 2)))  # no dim of 4: its owner updates it whole
    assert shards(small, [3, 1, 2, 0]) == (Shard(small, 3),)


@pytest.mark.parametrize("devices", [2, 4])
def test_every_device_updates_its_own_shard_of_every_box(devices):
    ff, _ = compiled(devices)
    taskgraph = ff.compiled.executor.taskgraph
    updates = [t for t in taskgraph.tasks if isinstance(t.action, A.Update)]
    per_device = Counter(t.device for t in updates)
    assert sorted(per_device) == list(range(devices))
    assert max(per_device.values()) < len(updates)  # no device runs all the updates
    for key, holders in taskgraph.weight_devices.items():
        assert holders == list(range(devices))
        if not ff.graph.layers[key[0]].weights[key[1]].trainable:
            continue
        mine = sorted((t.device, t.action.shard) for t in updates if t.action.key == key)
        cut = any(n >= devices for n in key[2].shape)
        assert [d for d, _ in mine] == (holders if cut else holders[:1])
        # the shards tile the box: their volumes add up, and each lies inside it
        assert sum(shard.volume for _, shard in mine) == key[2].volume
        assert all(key[2].contains(shard) for _, shard in mine)


@pytest.mark.parametrize("devices", [2, 4])
def test_each_device_keeps_only_its_shards_optimizer_state(devices):
    ff, _, _ = trained(devices, "adam", steps=1)
    executor = ff.compiled.executor
    for key in trainable_boxes(ff):
        owners = {shard.owner: shard.box for shard in executor.taskgraph.weight_shards(key)}
        for store in executor.stores:
            if store.device in owners:
                assert {name: slot.shape for name, slot in store.opt_state[key].items()} == \
                    {"m": owners[store.device].shape, "v": owners[store.device].shape}
            else:
                assert key not in store.opt_state


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("devices, build", [(2, concat_cnn), (4, concat_cnn), (4, narrow_mlp)])
def test_sharded_training_gives_the_single_device_weights_and_optimizer_state(devices, build,
                                                                             optimizer):
    _, losses, state = trained(devices, optimizer, build=build)
    _, ref_losses, ref = trained(1, optimizer, build=build)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    assert state.weights.keys() == ref.weights.keys()
    assert state.optimizer.keys() == ref.optimizer.keys() and ref.optimizer
    for ref_key, weight in ref.weights.items():
        np.testing.assert_allclose(state.weights[ref_key], weight, rtol=1e-5, atol=1e-6)
        for name, slot in ref.optimizer.get(ref_key, {}).items():
            np.testing.assert_allclose(state.optimizer[ref_key][name], slot, rtol=1e-5,
                                       atol=1e-6)


def test_a_restored_state_puts_each_shards_slots_on_its_owner_and_training_goes_on():
    ff, inputs = compiled(1, "adam")
    train_losses(ff, inputs, 2)
    saved = ff.compiled.capture()
    resumed, inputs4 = compiled(4, "adam")
    resumed.compiled.restore(saved)
    executor = resumed.compiled.executor
    for key in trainable_boxes(resumed):
        for shard in executor.taskgraph.weight_shards(key):
            slots = executor.stores[shard.owner].opt_state[key]
            for name, whole in saved.optimizer[key[:2]].items():
                np.testing.assert_array_equal(slots[name],
                                              whole[shard.box.relative_to(Box.full(whole.shape))])
    np.testing.assert_allclose(train_losses(resumed, inputs4, 2), train_losses(ff, inputs, 2),
                               rtol=1e-5)


def test_the_simulator_charges_each_shards_optimizer_state_to_its_owner():
    """narrow_mlp on 2 devices: kernels (3, 12) and (4, 3), biases (3,) and (4,), 55 floats,
    cut by rows into shards of 24+2+6+2 floats on device 0 and 12+1+6+2 on device 1. Each device
    holds every weight and its gradient; each shard's owner its momentum and the other
    holder's piece of its gradient."""
    ff, _ = compiled(2, "sgd", narrow_mlp)
    devices = ff.compiled.executor.taskgraph.weight_devices
    assert weight_memory(ff.graph, devices, 2, 1, True) == [4 * (2 * 55 + 2 * 34),
                                                            4 * (2 * 55 + 2 * 21)]
