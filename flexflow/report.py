"""`--profile FILE.html`: Dask's performance report of the training.

The report (`distributed.performance_report`: task stream, worker profiles, bandwidth, the
scheduler's logs) is made by the Dask scheduler, so a run with `--profile` always has one: on one
device, without `--scheduler`, a one-worker local cluster is started (as `--cluster` does) rather
than running in-process. Recording starts when `compile()` has created and initialised the weights
and ends when the script does (the launcher's exit, or the interpreter's); the file is then
written and its name printed. Task names in it are the executor's keys,
`<first layer>-<phase>-d<device>e<epoch>-<model>-<iteration>`.

The report is drawn with Bokeh; without it `--profile` is refused before anything runs.
"""

from __future__ import annotations

import atexit
import importlib.util
import sys

from .config import FFConfig, FlagError


def check(config: FFConfig) -> None:
    """Refuse `--profile` settings that cannot produce a report, naming the reason (whether
    the file can be written is deployment.check_output_file's)."""
    if not config.profile_file:
        return
    if config.in_process:
        raise FlagError("--profile needs a Dask scheduler to record the report; drop "
                        "--in-process (one device then runs on a one-worker local cluster)")
    if importlib.util.find_spec("bokeh") is None:
        raise FlagError("--profile needs the bokeh package to draw Dask's performance report: "
                        "pip install \"flexflow-dask[viz]\"")


_active: dict[str, "PerformanceReport"] = {}  # path -> the report recording into it


def start(client, path: str) -> None:
    """Start recording into `path`, unless a report already is (a model compiled again)."""
    if path not in _active:
        _active[path] = PerformanceReport(client, path).start()


class PerformanceReport:
    """Dask's performance report over a stretch of one client's work."""

    def __init__(self, client, path: str, stream=None):
        from distributed import performance_report

        self.client = client
        self.path = path
        self.stream = stream
        self._report = performance_report(filename=path)
        self._open = False

    def start(self) -> "PerformanceReport":
        with self.client.as_current():
            self._report.__enter__()
        self._open = True
        atexit.register(self.finish)
        return self

    def finish(self) -> None:
        """Write the report (once)."""
        if not self._open:
            return
        self._open = False
        with self.client.as_current():
            self._report.__exit__(None, None, None)
        print(f"Dask performance report written to {self.path}",
              file=self.stream or sys.stdout, flush=True)
