"""FFConfig: FlexFlow's run configuration, read from the command line like FlexFlow does.

Every flag of FlexFlow r22.07's `FFConfig::parse_args` is accepted with its default
(flexflow/flags.py: the table and the parser); unknown arguments pass through to the script.
`--help` and `--version` on the command line print and exit before any work starts.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Sequence

from . import __version__
from .flags import DLRM_FLAGS, FLAGS, Flag, FlagError, FlagWarning, help_text, parse_flags
from .trace import trace_ended

__all__ = ["FFConfig", "NetConfig", "DLRMConfig", "FlagError", "FlagWarning", "Flag", "FLAGS",
           "parse_flags",
           "command_line", "set_runtime_args"]


# Runtime flags (`-ll:gpu 2` ...) the launcher took off the script's sys.argv, as FlexFlow's does;
# FFConfig still reads them, as FlexFlow's read them from the runtime's own arguments.
_runtime_args: list[str] = []


def set_runtime_args(args: Sequence[str]) -> None:
    """Called by `flexflow.launcher` before it runs a script."""
    _runtime_args[:] = list(args)


def command_line() -> list[str]:
    """What `FFConfig()` parses: the runtime flags, then the script's arguments."""
    return [*_runtime_args, *sys.argv[1:]]


class FFConfig:
    """Run configuration. `FFConfig()` parses `sys.argv`; `FFConfig(argv=[...])` or keyword
    overrides (`FFConfig(batch_size=32)`) build one programmatically."""

    def __init__(self, argv: Sequence[str] | None = None, **overrides):
        self._argv = command_line() if argv is None else list(argv)
        exit_if_asked(self._argv)
        unknown = set(overrides) - {f.field for f in FLAGS}
        if unknown:
            raise TypeError(f"FFConfig got unknown settings {sorted(unknown)}")
        self._overrides = overrides
        self._trace_id = None  # the open trace's id (begin_trace)
        self.parse_args()

    def parse_args(self, argv: Sequence[str] | None = None) -> None:
        if argv is not None:
            self._argv = list(argv)
        for flag in FLAGS:
            setattr(self, flag.field, flag.default)
        if os.environ.get("DASK_SCHEDULER_ADDRESS"):
            self.scheduler_address = os.environ["DASK_SCHEDULER_ADDRESS"]
        given = {**parse_flags(self._argv), **self._overrides}
        for field, value in given.items():
            setattr(self, field, value)
        self._given = frozenset(given)

    @property
    def metrics_every(self) -> int:
        """Iterations between a fit's `[Metrics]` lines: `-p/--print-freq` when given (each
        epoch's last line is printed too), else every iteration, as FlexFlow prints them."""
        return max(1, self.print_freq) if "print_freq" in self._given else 1

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
        """Until `end_trace(trace_id)`, this config's models defer forward, zero_gradients,
        backward and update, and then make each hand-written iteration as one training step
        (flexflow/trace.py)."""
        if self._trace_id is not None:
            raise RuntimeError(f"begin_trace({trace_id}) inside trace {self._trace_id}: "
                               f"call end_trace({self._trace_id}) first")
        self._trace_id = trace_id

    def end_trace(self, trace_id: int) -> None:
        """Ends the trace `begin_trace(trace_id)` began: its models make what they deferred."""
        if trace_id != self._trace_id:
            raise RuntimeError(f"end_trace({trace_id}) does not end a trace: "
                               + (f"trace {self._trace_id} is open" if self._trace_id is not None
                                  else "none is open"))
        self._trace_id = None
        trace_ended(self)

    @property
    def tracing(self) -> bool:
        """(ours) Whether a trace is open (begin_trace without its end_trace yet)."""
        return self._trace_id is not None

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


def exit_if_asked(argv: Sequence[str]) -> None:
    """`--help`: print the flags and exit; `--version`: print the version and exit."""
    if "--help" in argv:
        print(help_text())
        raise SystemExit(0)
    if "--version" in argv:
        print(f"flexflow-dask {__version__} (FlexFlow r22.07's API)")
        raise SystemExit(0)


class DLRMConfig:
    """FlexFlow's DLRM settings, read from its DLRM flags (`--arch-mlp-bot 4-2`, ...) with the
    defaults of FlexFlow's DLRM example; the list settings are lists of ints."""

    def __init__(self, argv: Sequence[str] | None = None):
        values = parse_flags(command_line() if argv is None else argv, DLRM_FLAGS)
        for flag in DLRM_FLAGS:
            value = values.get(flag.field, flag.default)
            setattr(self, flag.field, list(value) if isinstance(value, tuple) else value)


class NetConfig:
    """Data set location for the example scripts (`-d/--dataset`)."""

    def __init__(self, argv: Sequence[str] | None = None):
        self.dataset_path = parse_flags(command_line() if argv is None else argv).get(
            "dataset_path", "")
