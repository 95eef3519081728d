"""`--profiling`: every operator's forward and backward time, measured on its devices while the
model trains, printed next to what the simulator predicts for the same tasks.

Measuring: the kernel tasks of the task graph the executor runs (forward and backward
partitions, and the partial statistics of reductions) are built timed (`taskgraph.Checks`): each
is timed where it runs (after synchronising the GPU, when there is one, `actions.run_timed`) and
the time comes back through the executors' metrics channel, the one way results already travel
from every device to the client. `OpProfiler.take` separates those records from the metric sums.

Predicting: the time the simulator gives each of those tasks when it simulates the same task
graph (`Simulator.simulate_taskgraph`) on the run's machine model: the one the flags name, or
else the one calibration measures on the run's devices (as the search uses).

Memory: each timed task also reads the bytes its device has allocated once it has run
(scheduler/memory_use.py); the largest per device over training runs is its measured peak,
printed under the table beside the memory model's prediction (scheduler/memory.py) and returned
by `FFModel.get_perf_metrics().peak_memory`.

Printed: one table, at the end of each `fit()` and, for hand-written training loops, when the
process ends; times are medians over partitions and training runs (graphs run in training mode:
`train_step`, or a hand-written loop's `forward` and `backward`), the first run left out as
warm-up. Inference passes (`eval`) are not counted.
"""

from __future__ import annotations

import atexit
import statistics
import sys

from .ops.graph import Graph
from .scheduler import actions as A

PHASES = ("forward", "backward")


def predict(simulation) -> dict[tuple[int, int, str], float]:
    """The simulator's time (ms) for each (layer, partition, phase), summed over its tasks, from
    a full simulation of the task graph (`Simulator.simulate_taskgraph`)."""
    predicted: dict[tuple[int, int, str], float] = {}
    for plan in simulation.plans:
        for task, ms in zip(plan.tasks, plan.task_ms):
            kernel = A.kernel_of(task.action)
            if kernel is not None:
                predicted[kernel] = predicted.get(kernel, 0.0) + ms
    return predicted


class OpProfiler:
    """Collects the measured times of one compiled model and prints them with the predictions."""

    def __init__(self, graph: Graph, simulation, machine_name: str, stream=None):
        """`simulation`: the simulator's full simulation of the task graph the model runs, on
        the machine `machine_name` describes."""
        self.graph = graph
        self.predicted = predict(simulation)
        self.predicted_memory = list(simulation.memory)
        self.peaks: dict[int, int] = {}  # device -> most bytes allocated after a timed task
        self.machine_name = machine_name
        self.stream = stream
        self._samples: dict[tuple[int, str], list[float]] = {}  # ms per partition and run
        self._calls: dict[tuple[int, str], list[int]] = {}      # the run of each sample
        self._recorded = 0  # runs recorded
        self._printed = 0   # runs recorded when the table was last printed
        atexit.register(self.print_pending)

    def take(self, pieces: list[dict], record: bool = True) -> list[dict]:
        """Strip the timings from one run's metric pieces, keeping them when `record` (runs in
        training mode; inference passes are left out); return the other pieces."""
        times: dict[tuple[int, int, str], float] = {}
        rest = []
        for piece in pieces:
            allocated = piece.get(A.ALLOCATED)
            if allocated is not None:
                device, nbytes = allocated
                if record and nbytes > self.peaks.get(device, -1):
                    self.peaks[device] = nbytes
                continue
            timing = piece.get(A.TIMING)
            if timing is None:
                rest.append(piece)
                continue
            layer, part, phase, ms = timing
            times[(layer, part, phase)] = times.get((layer, part, phase), 0.0) + ms
        if record and times:
            self._recorded += 1
            for (layer, part, phase), ms in times.items():
                self._samples.setdefault((layer, phase), []).append(ms)
                self._calls.setdefault((layer, phase), []).append(self._recorded)
        return rest

    def measured(self) -> dict[tuple[int, str], float]:
        """Median ms per (layer, phase) over partitions and runs, leaving out the first run
        (warm-up) of each when there are several."""
        out = {}
        for key, samples in self._samples.items():
            calls = self._calls[key]
            warm = [ms for ms, call in zip(samples, calls) if call != calls[0]]
            out[key] = statistics.median(warm or samples)
        return out

    def expected(self) -> dict[tuple[int, str], float]:
        """Median predicted ms per (layer, phase) over partitions."""
        samples: dict[tuple[int, str], list[float]] = {}
        for (layer, _, phase), ms in self.predicted.items():
            samples.setdefault((layer, phase), []).append(ms)
        return {key: statistics.median(values) for key, values in samples.items()}

    def table(self) -> str:
        measured, expected = self.measured(), self.expected()
        rows = [f"[Profiling] per-operator time in ms, median over partitions and "
                f"{self._recorded} training run(s), the first left out; predicted: by the "
                f"simulator on {self.machine_name}",
                f"{'layer':<24} {'type':<14} {'forward':>9} {'predicted':>9} "
                f"{'backward':>9} {'predicted':>9}"]

        def cell(table, key):
            return f"{table[key]:9.3f}" if key in table else f"{'-':>9}"
        for layer in self.graph.layers:
            if not any((layer.index, phase) in measured for phase in PHASES):
                continue
            cells = " ".join(cell(measured, (layer.index, p)) + " " + cell(expected,
                                                                         (layer.index, p))
                             for p in PHASES)
            rows.append(f"{layer.name:<24} {layer.type_name:<14} {cells}")
        rows += self.memory_lines()
        return "\n".join(rows)

    def memory_lines(self) -> list[str]:
        """One line per device: its measured peak allocated bytes and the memory model's."""
        return [f"[Profiling] device {device}: peak memory {nbytes / 2**20:.1f} MiB allocated, "
                f"predicted {self.predicted_memory[device] / 2**20:.1f} MiB"
                for device, nbytes in sorted(self.peaks.items())]

    def print_pending(self) -> None:
        """Print the table if iterations ran since it was last printed."""
        if self._recorded > self._printed:
            self._printed = self._recorded
            print(self.table(), file=self.stream or sys.stdout, flush=True)
