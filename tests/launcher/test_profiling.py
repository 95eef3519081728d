"""--profiling: kernel actions are timed where they run (checked against a known sleep), the
timing changes no result, every layer gets a row, and every measured time sits next to the
simulator's prediction for the same tasks, on the calibrated machine or a given machine model."""

import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from flexflow import profiling
from flexflow.core import FFConfig, FFModel, LossType, MetricsType, SGDOptimizer
from flexflow.scheduler import actions as A
from flexflow.scheduler.store import DeviceStore

from ..parallel.models import MODELS, train_losses
from ..search.helpers import TWO_GPUS_FILE
from .run import TINY_MLP, launch


@dataclass(frozen=True)
class SleepingBackward(A.Backward):
    seconds: float = 0.0

    def run(self, store, ctx, out):
        time.sleep(self.seconds)


def test_timed_action_reports_the_time_it_took():
    out = {}
    A.run_timed(SleepingBackward(7, 1, seconds=0.03), DeviceStore(0, np), None, out)
    record, allocated = out["metrics"]
    layer, part, phase, ms = record[A.TIMING]
    assert allocated[A.ALLOCATED][0] == 0
    assert (layer, part, phase) == (7, 1, "backward")
    assert 30 <= ms < 300


def train(argv, steps=4):
    """cnn_batch_norm (batch-norm statistics are reduced across partitions) trained data
    parallel; returns the model and its losses."""
    ff = FFModel(FFConfig(argv=argv, batch_size=8))
    inputs = MODELS["cnn_batch_norm"](ff)
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.05), metrics=[MetricsType.METRICS_ACCURACY],
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff, train_losses(ff, inputs, steps)


def rows(table: str) -> dict[str, list[str]]:
    """The table's rows by layer name (the memory lines under it left out)."""
    return {line.split()[0]: line.split()[2:] for line in table.splitlines()[2:]
            if not line.startswith("[Profiling]")}


def test_profiling_times_every_layer_and_changes_no_result():
    devices = ["-ll:gpu", "2", "--in-process"]
    profiled, losses = train([*devices, "--profiling"])
    _, reference = train(devices)
    assert losses == reference
    table = profiled.compiled.profiler.table()
    assert "predicted: by the simulator on calibrated: 2 x" in table  # measured on this machine
    cells = rows(table)
    assert list(cells) == [layer.name for layer in profiled.graph.layers]
    for name, (forward, predicted, backward, predicted_backward) in cells.items():
        assert float(forward) > 0 and float(predicted) > 0
        if name.startswith("Softmax"):  # its gradient is folded into the loss's
            assert backward == predicted_backward == "-"
        else:
            assert float(backward) > 0 and float(predicted_backward) > 0
    profiled.compiled.profiler.print_pending()  # nothing left to print at exit


def test_profiling_predictions_come_from_the_simulator(tmp_path):
    machine = tmp_path / "machine.txt"
    machine.write_text(TWO_GPUS_FILE)
    ff, _ = train(["-ll:gpu", "2", "--in-process", "--profiling", "--machine-model-file",
                   str(machine)], steps=2)
    table = ff.compiled.profiler.table()
    assert "predicted: by the simulator on machine.txt: 2 x GPU on 1 node(s)" in table
    for forward, predicted, backward, predicted_backward in rows(table).values():
        assert float(predicted) > 0
        assert (backward == "-") == (predicted_backward == "-")
    ff.compiled.profiler.print_pending()


def test_predictions_sum_each_partition_s_kernel_tasks():
    """Hand-made simulation: a forward partition with its partial statistic, a backward, and a
    send that is no kernel."""
    forward = A.Forward(3, 1, (), (), ())

    def task(action):
        return SimpleNamespace(action=action)
    plan = SimpleNamespace(tasks=(task(A.ForwardPartial(forward)), task(forward),
                                  task(A.SendPartial(3, "forward", 1, 0)), task(A.Backward(3, 1))),
                           task_ms=(0.5, 2.0, 9.0, 4.0))
    predicted = profiling.predict(SimpleNamespace(plans=[plan]))
    assert predicted == {(3, 1, "forward"): 2.5, (3, 1, "backward"): 4.0}


def test_hand_written_loop_prints_its_table_at_exit():
    result = launch(TINY_MLP, "-ll:py", "1", "-ll:gpu", "1", "-b", "8", "--profiling")
    table = result.stdout[result.stdout.index("[Profiling]"):]
    assert list(rows(table)) == ["Dense_100", "Dense_101", "Softmax_102"]


def test_profiling_measures_each_devices_peak_memory_next_to_the_prediction(capsys):
    """The allocated bytes after each timed task, largest over the steps, beside the memory
    model's figure; activations and weights of tens of MB, so the kernel libraries' own
    buffers (about 10 MB) stay within the tolerance."""
    from flexflow.core import ActiMode, DataType
    ff = FFModel(FFConfig(argv=["--profiling"], batch_size=512))
    x = ff.create_tensor([512, 1024], DataType.DT_FLOAT)
    ff.softmax(ff.dense(ff.dense(x, 4096, ActiMode.AC_MODE_RELU), 10))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.01, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    assert ff.get_perf_metrics().peak_memory is None  # nothing measured yet
    x.set_tensor(ff, np.ones((512, 1024), np.float32))
    ff.label_tensor.set_tensor(ff, np.zeros((512, 1), np.int32))
    for _ in range(2):
        ff.train_step()
    (measured,) = ff.get_perf_metrics().peak_memory
    predicted = ff.compiled.profiler.predicted_memory[0]
    assert predicted > 50e6 and abs(measured - predicted) < 0.25 * predicted
    assert f"device 0: peak memory {measured / 2**20:.1f} MiB allocated, predicted " \
           f"{predicted / 2**20:.1f} MiB" in ff.compiled.profiler.table()
