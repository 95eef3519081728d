"""--per-partition-batch-norm: each sample partition of a batch norm normalises with its own
samples' statistics, as FlexFlow's cuDNN calls and PyTorch DDP's replicas do, and the running
statistics are the first sample partition's on every device (DDP's rank 0, broadcast_buffers).

Oracles: PyTorch DDP over two gloo processes (tests/parallel/ddp.py) for the sample split; the
single-device run for everything the option leaves exact (one device, height splits, the
default's running statistics however the partitions are placed)."""

import numpy as np

from flexflow.core import FFConfig
from flexflow.ops.batch_norm import BatchNorm
from flexflow.scheduler.simulator import Simulator
from flexflow.scheduler.strategy import ParallelConfig, data_parallel_strategy
from flexflow.scheduler.taskgraph import Checks

from ..search.helpers import compiled as compiled_for_search
from ..search.helpers import small_machine
from .ddp import conv_bn_net, ddp_run
from .models import BATCH, MODELS, batches, strategy, train_losses
from .test_strategy_invariance import Run, assert_same_run, compiled, reference, train, weights
from .training import all_weights

OPTION = "--per-partition-batch-norm"
TWO = ["-ll:gpu", "2", "--in-process"]
STEPS = 3  # of the DDP comparison


def probabilities(ff, inputs, x: np.ndarray) -> np.ndarray:
    """The model's output on `x` in an inference pass (batch norms on their running
    statistics)."""
    inputs[0].set_tensor(ff, x)
    ff.forward(training=False)
    return ff.get_layer_by_id(len(ff.graph.layers) - 1).get_output_tensor().get_tensor(ff)


def test_the_flag_reaches_every_batch_norm_at_compile():
    assert FFConfig(argv=[]).per_partition_batch_norm is False
    for argv, per_partition in (([OPTION], True), ([], False)):
        ff, _ = compiled(MODELS["cnn_batch_norm"], argv)
        ops = [layer.op for layer in ff.graph.layers if isinstance(layer.op, BatchNorm)]
        assert len(ops) == 2 and all(op.per_partition == per_partition for op in ops)
        assert all(op.reduction_dims == ((2, 3) if per_partition else (0, 2, 3)) for op in ops)


def test_a_sample_split_matches_ddp_per_replica_batch_norm():
    """Losses, weights, running statistics and then an inference pass (each device on the
    running statistics of the first sample partition) as DDP's with plain nn.BatchNorm2d."""
    ff, inputs = compiled(conv_bn_net, TWO + [OPTION], "sample", 2)
    initial = all_weights(ff)
    data = batches(inputs, STEPS)
    evaluated = batches(inputs, 1, seed=1)[0][0][0]
    losses = train_losses(ff, inputs, STEPS)
    their_losses, their_weights, their_probabilities = ddp_run(initial, data, evaluated)
    np.testing.assert_allclose(losses, their_losses, rtol=1e-4)
    for k, (ours, theirs) in enumerate(zip(all_weights(ff), their_weights, strict=True)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6, err_msg=f"weight {k}")
    np.testing.assert_allclose(probabilities(ff, inputs, evaluated), their_probabilities,
                               rtol=1e-4, atol=1e-6)


def test_on_one_device_the_option_gives_the_same_numbers():
    assert_same_run(train(MODELS["cnn_batch_norm"], [OPTION]), reference("cnn_batch_norm"))


def test_under_the_option_a_height_split_still_reduces_exactly():
    assert_same_run(train(MODELS["cnn_batch_norm"], TWO + [OPTION], "attribute", 2),
                    reference("cnn_batch_norm"))


def sample_by_height(graph) -> dict:
    """2-way sample splits on devices 0 and 1; the batch norms' split 2 ways by sample and 2
    by height over devices 0 to 3."""
    configs = strategy("sample", graph, 2)
    for layer in graph.layers:
        if isinstance(layer.op, BatchNorm):
            configs[layer.name] = ParallelConfig((2, 1, 2, 1), (0, 1, 2, 3))
    return configs


def test_under_the_option_sample_by_height_splits_give_the_sample_splits_numbers():
    """Each sample half's statistics combine its height halves' exactly, so the run is the
    2-way sample split's."""
    build = MODELS["cnn_batch_norm"]
    assert_same_run(train(build, ["-ll:gpu", "4", "--in-process", OPTION], sample_by_height),
                    train(build, TWO + [OPTION], "sample", 2))


def shared_device(graph) -> dict:
    """Every layer split 2 ways by sample, both halves on device 0."""
    return {name: ParallelConfig(c.degrees, (0,) * len(c.devices))
            for name, c in strategy("sample", graph, 2).items()}


def test_partitions_sharing_a_device_update_the_running_statistics_once():
    """Without the option, both sample halves of every layer on one device give the single
    device's numbers, running statistics included."""
    assert_same_run(train(MODELS["cnn_batch_norm"], TWO, shared_device),
                    reference("cnn_batch_norm"))


def trained_and_inferred(argv, kind=None) -> tuple[Run, np.ndarray]:
    """cnn_batch_norm's run of STEPS steps compiled with `argv` under `kind` on 2 devices, and
    the probabilities of an inference pass after it."""
    ff, inputs = compiled(MODELS["cnn_batch_norm"], argv, kind, 2)
    losses = train_losses(ff, inputs, STEPS)
    return (Run(np.array(losses), weights(ff)),
            probabilities(ff, inputs, batches(inputs, 1, seed=1)[0][0][0]))


def test_inference_after_a_sample_split_reads_the_single_devices_running_statistics():
    """Without the option the second device's copy of the running statistics is brought level
    with the first's before an inference pass reads it."""
    split, split_p = trained_and_inferred(TWO, "sample")
    single, single_p = trained_and_inferred([])
    assert_same_run(split, single)
    np.testing.assert_allclose(split_p, single_p, rtol=1e-4, atol=1e-6)


def reversed_devices(graph) -> dict:
    """Every layer split 2 ways by sample, the first half on device 1."""
    return {name: ParallelConfig(c.degrees, tuple(reversed(c.devices)))
            for name, c in strategy("sample", graph, 2).items()}


def test_under_the_option_the_first_sample_partition_leads_on_any_device():
    """The running statistics are the first sample partition's wherever it runs."""
    first, first_p = trained_and_inferred(TWO + [OPTION], "sample")
    second, second_p = trained_and_inferred(TWO + [OPTION], reversed_devices)
    assert_same_run(second, first)
    np.testing.assert_allclose(second_p, first_p, rtol=1e-4, atol=1e-6)


def simulated(argv, devices: int = 4):
    """The full and the delta simulation of data parallelism on `devices` for cnn_batch_norm
    compiled with `argv`, and its task graph's partial sends."""
    ff, objective = compiled_for_search(MODELS["cnn_batch_norm"], BATCH, argv)
    simulator = Simulator(ff.graph, objective, small_machine(devices), ff.compiled.loss,
                          ff.optimizer.rule(), Checks(finite_gradients=True))
    dp = data_parallel_strategy(ff.graph, devices)
    sends = [t for t in simulator.builder.build(dp).tasks if t.key.kind == "partialsend"]
    return simulator.simulate_full(dp), simulator.simulate(dp), sends


def test_the_simulator_costs_the_option_from_the_graph_that_runs():
    """Under the option a sample split exchanges no batch-norm partials, and its simulated
    iteration is no slower than the exact one's; delta and full simulation agree."""
    exact_full, exact_delta, exact_sends = simulated(["--in-process"])
    full, delta, sends = simulated(["--in-process", OPTION])
    assert exact_sends and not sends
    for a, b in ((exact_full, exact_delta), (full, delta)):
        assert a.time == b.time and a.memory == b.memory
    assert full.time <= exact_full.time
