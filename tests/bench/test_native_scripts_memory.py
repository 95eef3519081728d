"""bench/native_scripts_memory.py: its synthetic CIFAR-10 is read by our loader as FlexFlow's
scripts read it, and a script's run stops after its iterations with its peak memory counted."""

import os
import sys
from pathlib import Path

import numpy as np
import psutil

BENCH = Path(__file__).parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import native_scripts_memory as bench  # noqa: E402

ALLOCATED = 300_000_000
SCRIPT = f"""
import time
import numpy as np
data = np.ones({ALLOCATED}, np.uint8)
for _ in range(10):
    print("[Metrics] accuracy: 0.0% (0 / 16)", flush=True)
    time.sleep(0.7)
time.sleep(600)
"""


def test_synthetic_cifar10_loads_as_the_scripts_load_it(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEXFLOW_DATA_DIR", str(bench.write_cifar10(tmp_path)))
    monkeypatch.setenv("FLEXFLOW_DATA_VERIFY", "0")
    from flexflow.keras.datasets import cifar10
    (x_train, y_train), (x_test, y_test) = cifar10.load_data(10000)
    assert x_train.shape == (10000, 3, 32, 32) and x_train.dtype == np.uint8
    assert y_train.shape == (10000, 1) and set(np.unique(y_train)) <= set(range(10))
    assert x_test.shape == (10000, 3, 32, 32) and y_test.shape == (10000, 1)


def test_a_run_stops_after_its_iterations_and_counts_the_peak(tmp_path):
    script = tmp_path / "fake.py"
    script.write_text(SCRIPT)
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    figures = bench.run_script(script, dict(os.environ), 3, 120, tmp_path / "fake.log")
    assert figures["iterations"] == 3 and figures["exit"] is None
    assert figures["peak"] >= ALLOCATED and figures["hwm"] >= ALLOCATED
    assert len(figures["at_lines"]) == figures["iterations"]
    assert figures["seconds"] < 60  # stopped, not left to its sleep
    left = {p.pid for p in psutil.Process().children(recursive=True)} - children_before
    assert not left


def test_a_script_that_fails_is_reported_as_exited(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("raise SystemExit(3)\n")
    figures = bench.run_script(script, dict(os.environ), 3, 120, tmp_path / "broken.log")
    assert figures["exit"] == 3 and figures["iterations"] == 0
