"""A multi-node launch on loopback, as the README shows it: `dask scheduler` and `dask worker`
processes, then `flexflow_python train.py --scheduler ADDRESS`. It trains to the losses of the
in-process run; with `--profile` it also writes Dask's performance report of the training."""

import re
from html.parser import HTMLParser

import numpy as np
import pytest

from flexflow.config import FFConfig, FlagError
from flexflow.deployment import check_diagnostics

from ..parallel.cluster import loopback_cluster
from .run import TINY_MLP, launch, step_losses
from ..search.helpers import TWO_GPUS_FILE as MACHINE

# the executor's task keys: <first task, e.g. Dense_100-forward or input0-load-d0>-d<device>e<epoch>
# -<model id>-<iteration>
TASK_KEY = re.compile(r"[A-Za-z]\w*-[a-z]+(?:-d\d+)?-d(\d+)e\d+-[0-9a-f]{8}-\d+")


@pytest.fixture(scope="module")
def scheduler_address():
    with loopback_cluster(workers=2) as address:
        yield address


def test_loopback_cluster_trains_like_the_in_process_run(scheduler_address):
    remote = launch(TINY_MLP, "-ll:py", "1", "-ll:gpu", "2", "-b", "8", "--steps", "5",
                    "--scheduler", scheduler_address)
    local = launch(TINY_MLP, "-b", "8", "--steps", "5", launcher=False)  # one device, in-process
    assert f"Connected to Dask scheduler {scheduler_address}" in remote.stdout
    np.testing.assert_allclose(step_losses(remote), step_losses(local), rtol=1e-5)
    assert len(step_losses(remote)) == 5


def test_profiling_gathers_every_device_s_times(scheduler_address, tmp_path):
    """Under a strategy that is not data parallel, some fused tasks hold no loss; their timings
    must reach the client too."""
    strategy = tmp_path / "strategy.json"
    strategy.write_text('{"layers": {"Dense_100": {"degrees": [1, 2], "devices": [0, 1]}, '
                        '"Dense_101": {"degrees": [2, 1], "devices": [1, 0]}, '
                        '"Softmax_102": {"degrees": [2, 1], "devices": [0, 1]}}}')
    machine = tmp_path / "machine.txt"  # (predicting on it spares the cluster calibration)
    machine.write_text(MACHINE)
    result = launch(TINY_MLP, "-ll:gpu", "2", "-b", "8", "--scheduler", scheduler_address,
                    "--import", strategy, "--profiling", "--machine-model-file", machine)
    table = result.stdout[result.stdout.index("[Profiling]"):].splitlines()[2:]
    measured = {line.split()[0]: line.split()[2:] for line in table}
    for name in ("Dense_100", "Dense_101"):
        forward, _, backward, _ = measured[name]
        assert float(forward) > 0 and float(backward) > 0, (name, measured[name])


class _Tags(HTMLParser):
    """Checks that every element opened is closed in order (void elements aside)."""

    VOID = {"meta", "link", "br", "img", "input", "hr", "source", "area", "base", "col", "wbr"}

    def __init__(self):
        super().__init__()
        self.open: list[str] = []
        self.seen: set[str] = set()
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.seen.add(tag)
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):  # <link ... />
        self.seen.add(tag)

    def handle_endtag(self, tag):
        if not self.open or self.open[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
        else:
            self.open.pop()


def check_report(path, devices: set[str]) -> None:
    text = path.read_text()
    tags = _Tags()
    tags.feed(text)
    tags.close()
    assert text.lstrip().lower().startswith("<!doctype html>")
    assert not tags.errors and not tags.open, (tags.errors[:5], tags.open)
    assert {"html", "head", "body", "script"} <= tags.seen
    assert {m.group(1) for m in TASK_KEY.finditer(text)} == devices


def test_profile_writes_a_performance_report_naming_our_tasks(scheduler_address, tmp_path):
    pytest.importorskip("bokeh")
    path = tmp_path / "report.html"
    result = launch(TINY_MLP, "-ll:gpu", "2", "-b", "8", "--scheduler", scheduler_address,
                    "--profile", path)
    assert f"Dask performance report written to {path}" in result.stdout
    check_report(path, {"0", "1"})


def test_profile_on_one_device_uses_a_one_worker_cluster(tmp_path):
    pytest.importorskip("bokeh")
    path = tmp_path / "one.html"
    result = launch(TINY_MLP, "-b", "8", "--profile", path)
    assert "Dask dashboard:" in result.stdout
    check_report(path, {"0"})


@pytest.mark.parametrize("argv, message", [
    (["--profile", "r.html", "--in-process"], "needs a Dask scheduler"),
    (["--profile", "/no/such/folder/r.html"], "does not exist"),
])
def test_profile_settings_that_cannot_work_are_refused(argv, message):
    with pytest.raises(FlagError, match=message):
        check_diagnostics(FFConfig(argv=argv))
