"""FFConfig: FlexFlow's run configuration, read from the command line like FlexFlow does.

Every flag of FlexFlow r22.07's `FFConfig::parse_args` is accepted with its default; unknown
arguments are ignored (scripts add their own flags and parse them with argparse), but a known flag
with a malformed value (`-b abc`) is an error that names the flag.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, Sequence


class FlagError(ValueError):
    """A command-line flag had a value of the wrong form."""


@dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]
    field: str
    parse: Callable[[str], object] | None  # None: a switch that takes no value
    default: object


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError("must be positive")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must not be negative")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("must be finite")
    return value


def _size_mb(text: str) -> int:
    """Realm sizes are megabytes, optionally with a unit suffix (`-ll:fsize 14g`)."""
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    if text and text[-1].lower() in units:
        value = _finite_float(text[:-1]) * units[text[-1].lower()]
        if not 0 <= value < math.inf:
            raise ValueError("must be a finite size, not negative")
        return int(value)
    return _non_negative_int(text)


FLAGS = (
    Flag(("-e", "--epochs"), "epochs", _positive_int, 1),
    Flag(("-b", "--batch-size"), "batch_size", _positive_int, 64),
    Flag(("--lr", "--learning-rate"), "learning_rate", _finite_float, 0.01),
    Flag(("--wd", "--weight-decay"), "weight_decay", _finite_float, 0.0001),
    Flag(("-p", "--print-freq"), "print_freq", int, 10),
    Flag(("-d", "--dataset"), "dataset_path", str, ""),
    Flag(("--budget", "--search-budget"), "search_budget", _non_negative_int, 0),
    Flag(("--alpha", "--search-alpha"), "search_alpha", _finite_float, 1.0),
    Flag(("--simulator-workspace-size",), "simulator_workspace_size", _non_negative_int, 2 << 30),
    Flag(("--import", "--import-strategy"), "import_strategy_file", str, ""),
    Flag(("--export", "--export-strategy"), "export_strategy_file", str, ""),
    Flag(("--enable-parameter-parallel",), "enable_parameter_parallel", None, False),
    Flag(("--enable-attribute-parallel",), "enable_attribute_parallel", None, False),
    Flag(("--enable-sample-parallel",), "enable_sample_parallel", None, True),
    Flag(("-ll:gpu",), "workers_per_node", _positive_int, 0),  # 0: not given, one device
    Flag(("-ll:cpu",), "cpus_per_node", _non_negative_int, 0),
    Flag(("-ll:fsize",), "device_memory_mb", _size_mb, 0),
    Flag(("-ll:zsize",), "zero_copy_memory_mb", _size_mb, 0),
    Flag(("-ll:util",), "utility_threads", _non_negative_int, 1),
    Flag(("-ll:bgwork",), "background_threads", _non_negative_int, 1),
    Flag(("--nodes",), "num_nodes", _positive_int, 1),
    Flag(("--profiling",), "profiling", None, False),
    Flag(("--allow-tensor-op-math-conversion",), "allow_tensor_op_math_conversion", None, False),
    Flag(("--fusion",), "perform_fusion", None, False),
    Flag(("--overlap",), "search_overlap_backward_update", None, False),
    Flag(("--taskgraph",), "export_strategy_task_graph_file", str, ""),
    Flag(("--machine-model-version",), "machine_model_version", _non_negative_int, 0),
    Flag(("--machine-model-file",), "machine_model_file", str, ""),
    Flag(("--simulator-segment-size",), "simulator_segment_size", _positive_int, 16777216),
    Flag(("--simulator-max-num-segments",), "simulator_max_num_segments", _positive_int, 1),
    Flag(("--enable-propagation",), "enable_propagation", None, False),
    Flag(("--disable-control-replication",), "disable_control_replication", None, False),
    Flag(("--python-data-loader-type",), "python_data_loader_type", _positive_int, 2),
    Flag(("-i", "--iterations"), "iterations", _positive_int, 1),
    Flag(("--scheduler",), "scheduler_address", str, ""),
    Flag(("--tls-ca-file",), "tls_ca_file", str, ""),
    Flag(("--tls-cert",), "tls_cert", str, ""),
    Flag(("--tls-key",), "tls_key", str, ""),
    Flag(("--in-process",), "in_process", None, False),
    Flag(("--cluster",), "force_cluster", None, False),
    Flag(("--cpu",), "cpu_only", None, False),
    Flag(("--seed",), "seed", _non_negative_int, 0),
    Flag(("--allow-nonfinite",), "allow_nonfinite", None, False),
    Flag(("--recovery-interval",), "recovery_interval", _non_negative_int, 10),
    Flag(("--profile",), "profile_file", str, ""),
    Flag(("--timeline",), "timeline_file", str, ""),
    Flag(("--search-plot",), "search_plot_file", str, ""),
)
_BY_NAME = {name: flag for flag in FLAGS for name in flag.names}

# Runtime flags (`-ll:gpu 2` ...) the launcher took off the script's sys.argv, as FlexFlow's does;
# FFConfig still reads them, as FlexFlow's read them from the runtime's own arguments.
_runtime_args: list[str] = []


def set_runtime_args(args: Sequence[str]) -> None:
    """Called by `flexflow.launcher` before it runs a script."""
    _runtime_args[:] = list(args)


def command_line() -> list[str]:
    """What `FFConfig()` parses: the runtime flags, then the script's arguments."""
    return [*_runtime_args, *sys.argv[1:]]


def parse_flags(argv: Sequence[str]) -> dict[str, object]:
    """Values of the known flags in `argv`; unknown tokens are skipped."""
    values: dict[str, object] = {}
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        flag = _BY_NAME.get(token)
        i += 1
        if flag is None:
            continue
        if flag.parse is None:
            values[flag.field] = True
            continue
        if i >= len(tokens):
            raise FlagError(f"flag {token} needs a value")
        text = tokens[i]
        i += 1
        try:
            values[flag.field] = flag.parse(text)
        except ValueError as error:
            kind = getattr(flag.parse, "__name__", "value").lstrip("_").replace("_", " ")
            raise FlagError(f"flag {token}: {text!r} is not a valid {kind} ({error})") from None
    return values


class FFConfig:
    """Run configuration. `FFConfig()` parses `sys.argv`; `FFConfig(argv=[...])` or keyword
    overrides (`FFConfig(batch_size=32)`) build one programmatically."""

    def __init__(self, argv: Sequence[str] | None = None, **overrides):
        self._argv = command_line() if argv is None else list(argv)
        unknown = set(overrides) - {f.field for f in FLAGS}
        if unknown:
            raise TypeError(f"FFConfig got unknown settings {sorted(unknown)}")
        self._overrides = overrides
        self.parse_args()

    def parse_args(self, argv: Sequence[str] | None = None) -> None:
        if argv is not None:
            self._argv = list(argv)
        for flag in FLAGS:
            setattr(self, flag.field, flag.default)
        if os.environ.get("DASK_SCHEDULER_ADDRESS"):
            self.scheduler_address = os.environ["DASK_SCHEDULER_ADDRESS"]
        for field, value in {**parse_flags(self._argv), **self._overrides}.items():
            setattr(self, field, value)

    # ---- FlexFlow's read-only properties --------------------------------------------------------
    @property
    def enable_control_replication(self) -> bool:
        return not self.disable_control_replication

    @property
    def num_devices(self) -> int:
        """Devices the run spreads over (at least one: the in-process default)."""
        return max(1, self.workers_per_node) * self.num_nodes

    def get_current_time(self) -> float:
        """Microseconds, as FlexFlow's `get_current_time`."""
        return time.perf_counter() * 1e6

    def begin_trace(self, trace_id: int) -> None:
        """Legion tracing marks; each iteration is already one replayed Dask graph here."""

    def end_trace(self, trace_id: int) -> None:
        """See begin_trace."""

    # ---- r20.12 getters -------------------------------------------------------------------------
    def get_batch_size(self) -> int:
        return self.batch_size

    def get_epochs(self) -> int:
        return self.epochs

    def get_workers_per_node(self) -> int:
        return self.workers_per_node

    def get_num_nodes(self) -> int:
        return self.num_nodes

    def __repr__(self) -> str:
        return (f"FFConfig(batch_size={self.batch_size}, epochs={self.epochs}, "
                f"workers_per_node={self.workers_per_node}, num_nodes={self.num_nodes})")


class NetConfig:
    """Data set location for the example scripts (`-d/--dataset`)."""

    def __init__(self, argv: Sequence[str] | None = None):
        self.dataset_path = parse_flags(command_line() if argv is None else argv).get(
            "dataset_path", "")
