"""The non-finite guard: a NaN or Inf in the forward pass, the loss or a gradient stops training
with `NonFiniteError` naming the first layer where it appeared and the iteration, before a
non-finite gradient is applied; `--allow-nonfinite` trains on; a run without one is unchanged.
On one device and on two devices in this process (data parallel: each weight updated in two
shards, each summed on its own device), and once on a local cluster of two worker processes."""

import numpy as np
import pytest

from flexflow.core import FFConfig, FFModel, LossType, NonFiniteError, SGDOptimizer

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's overflow notes

BATCH = 8
DEVICES = {"1 device": [], "2 devices": ["-ll:gpu", "2", "--in-process"]}


@pytest.fixture(params=list(DEVICES))
def devices(request):
    return DEVICES[request.param]


def compiled(build, argv):
    """A model whose layers `build(ff, x)` adds after the input (16 features), a softmax on top,
    compiled for sparse cross-entropy; returns (ffmodel, input tensor)."""
    ff = FFModel(FFConfig(argv=list(argv), batch_size=BATCH))
    x = ff.create_tensor([BATCH, 16])
    ff.softmax(build(ff, x))
    ff.compile(optimizer=SGDOptimizer(ff, 0.1),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff, x


def fit(ff, x, inputs):
    labels = (np.arange(len(inputs)) % 4).astype(np.int32).reshape(-1, 1)
    ff.fit(x=ff.create_data_loader(x, inputs.astype(np.float32)),
           y=ff.create_data_loader(ff.label_tensor, labels), epochs=1)


def dense_exp_dense(ff, x):
    return ff.dense(ff.exp(ff.dense(x, 32, name="first"), name="growth"), 4, name="last")


def dense_zero_sqrt_dense(ff, x):
    """Finite forward (the square root of zeros, added to a second dense layer's output);
    sqrt's gradient at zero is infinite, and NaN once multiplied by the zero that made it."""
    zeros = ff.scalar_multiply(ff.dense(x, 32, name="first"), 0.0, name="mute")
    root = ff.pow(zeros, 0.5, name="root")
    return ff.dense(ff.add(root, ff.dense(x, 32, name="side")), 4, name="last")


def kernel(ff, name):
    return ff.get_layer_by_name(name).get_weight_tensor()


def unique(ff, name):
    """The unique layer name errors use, `<name>_<guid>`."""
    return ff.get_layer_by_name(name).op_name


def normal_batches(count, seed=0):
    return np.random.default_rng(seed).normal(0, 0.5, (count * BATCH, 16))


def test_an_overflow_in_the_forward_pass_names_its_layer_and_iteration(devices, capsys):
    ff, x = compiled(dense_exp_dense, devices)
    first = kernel(ff, "first")
    first.set_weights(ff, np.abs(first.get_weights(ff)))  # large inputs give large outputs
    inputs = normal_batches(3)
    inputs[BATCH:2 * BATCH] = 100.0  # exp overflows on the second batch only
    with pytest.raises(NonFiniteError) as caught:
        fit(ff, x, inputs)
    error = caught.value
    growth = unique(ff, "growth")
    assert (error.layer, error.tensor, error.iteration) == (growth, "output", 2)
    assert f"training iteration 2, layer '{growth}': its output (8, 32) is not finite" in \
        str(error)
    assert capsys.readouterr().err.count("[Metrics]") == 1  # the first iteration ran in full


def test_a_nan_weight_is_named_with_its_layer(devices):
    ff, x = compiled(dense_exp_dense, devices)
    last = kernel(ff, "last")
    weights = last.get_weights(ff)
    weights[3, 1] = np.nan
    last.set_weights(ff, weights)
    with pytest.raises(NonFiniteError, match=rf"iteration 1, layer '{unique(ff, 'last')}': its "
                       r"output \(8, 4\) is not finite \(NaN or Inf\) \(as is its weight "
                       r"'kernel'\)"):
        fit(ff, x, normal_batches(2))


@pytest.mark.parametrize("devices", [*DEVICES.values(), ["-ll:gpu", "2", "--cluster"]],
                         ids=[*DEVICES, "2 worker processes"])
def test_a_gradient_only_nan_is_caught_before_it_is_applied(devices):
    """On worker processes too, where the updates' reports come back as metrics do."""
    ff, x = compiled(dense_zero_sqrt_dense, devices)
    before = {name: kernel(ff, name).get_weights(ff) for name in ("first", "last")}
    with pytest.raises(NonFiniteError) as caught:
        fit(ff, x, normal_batches(2))
    error = caught.value
    assert (error.layer, error.tensor, error.iteration) == (unique(ff, "root"), "input gradient",
                                                            1)
    assert ("the gradient its backward pass gives its input, the output of layer "
            f"'{unique(ff, 'mute')}'") in str(error)
    # the forward pass and the loss were finite: only the gradient was not
    assert np.isfinite(ff.get_layer_by_name("last").get_output_tensor().get_tensor(ff)).all()
    first_grad = kernel(ff, "first").get_gradients(ff)
    assert np.isnan(first_grad).any()
    # that NaN gradient was not applied; the finite one of the last layer was
    np.testing.assert_array_equal(kernel(ff, "first").get_weights(ff), before["first"])
    assert not np.array_equal(kernel(ff, "last").get_weights(ff), before["last"])


def test_a_nan_in_the_data_is_named_as_such(devices):
    ff, x = compiled(dense_exp_dense, devices)
    inputs = normal_batches(2)
    inputs[BATCH + 5, 7] = np.nan
    with pytest.raises(NonFiniteError, match=r"training iteration 2: the batch fed to input "
                       r"tensor #0 \(8, 16\) is not finite") as caught:
        fit(ff, x, inputs)
    assert (caught.value.layer, caught.value.tensor) == (None, "input")


def test_a_hand_written_loop_stops_at_update(devices):
    ff, x = compiled(dense_zero_sqrt_dense, devices)
    ff.create_data_loader(x, normal_batches(1).astype(np.float32)).next_batch(ff)
    ff.create_data_loader(ff.label_tensor, np.zeros((BATCH, 1), np.int32)).next_batch(ff)
    ff.forward()
    ff.zero_gradients()
    ff.backward()  # the loss is finite: nothing to say yet
    with pytest.raises(NonFiniteError, match=f"layer '{unique(ff, 'root')}'"):
        ff.update()


def test_allow_nonfinite_trains_on(devices, capsys):
    ff, x = compiled(dense_exp_dense, devices + ["--allow-nonfinite"])
    last = kernel(ff, "last")
    weights = last.get_weights(ff)
    weights[3, 1] = np.nan
    last.set_weights(ff, weights)
    fit(ff, x, normal_batches(3))
    assert capsys.readouterr().err.count("[Metrics]") == 3
    assert np.isnan(ff.get_perf_metrics().last_loss)
    assert np.isnan(kernel(ff, "first").get_weights(ff)).any()  # as FlexFlow would have it


def test_the_guard_does_not_change_a_normal_run(devices):
    def train(flags):
        ff, x = compiled(dense_exp_dense, devices + flags)
        fit(ff, x, normal_batches(3))
        return ff.get_perf_metrics().sums, {name: kernel(ff, name).get_weights(ff)
                                            for name in ("first", "last")}
    guarded, unguarded = train([]), train(["--allow-nonfinite"])
    assert guarded[0] == unguarded[0]
    for name in ("first", "last"):
        np.testing.assert_array_equal(guarded[1][name], unguarded[1][name])


def test_a_nan_in_one_shard_of_one_replicas_gradient_leaves_the_whole_weight_as_it_was():
    """Data parallel on two devices, each weight box is updated in two shards, one per device,
    each keeping its shard's momentum. A NaN in device 1's gradient of the first kernel, inside
    the shard device 0 updates, reaches only device 0's sum; yet neither device updates its
    shard or its momentum, while the other weights take their step."""
    ff = FFModel(FFConfig(argv=DEVICES["2 devices"], batch_size=BATCH))
    x = ff.create_tensor([BATCH, 16])
    ff.softmax(dense_exp_dense(ff, x))
    ff.compile(optimizer=SGDOptimizer(ff, 0.1, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    fit(ff, x, normal_batches(1))  # a finite step: each shard's owner has its momentum
    executor = ff.compiled.executor
    [key] = [k for k in executor.taskgraph.weight_devices
             if k[:2] == (ff.get_layer_by_name("first").idx, 0)]
    first, second = executor.taskgraph.weight_shards(key)
    assert (first.owner, second.owner) == (0, 1)
    ff.create_data_loader(x, normal_batches(1, seed=1).astype(np.float32)).next_batch(ff)
    ff.create_data_loader(ff.label_tensor, np.zeros((BATCH, 1), np.int32)).next_batch(ff)
    ff.forward()
    ff.zero_gradients()
    ff.backward()
    executor.stores[1].weight_grads[key][first.box.relative_to(key[2])][0, 0] = np.nan

    def held(name):
        return [np.array(store.weights[key]) for store in executor.stores] + [
            np.array(store.opt_state[key]["v"]) for store in executor.stores] + [
            kernel(ff, name).get_weights(ff)]
    before, last_before = held("first"), kernel(ff, "last").get_weights(ff)
    assert before[2].shape == first.box.shape and before[3].shape == second.box.shape
    with pytest.raises(NonFiniteError, match=f"layer '{unique(ff, 'first')}'"):
        ff.update()
    for was, now in zip(before, held("first")):
        np.testing.assert_array_equal(now, was)
    assert not np.array_equal(kernel(ff, "last").get_weights(ff), last_before)
