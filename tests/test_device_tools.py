"""tools/device/: the lent GPU machine's one command runs its steps in a dry run here, each
step's output and status under $OUT as it finishes; and the wheelhouse asks only for what the
machine's image lacks (tools/device/wheelhouse.py; building it downloads, so it is run by hand
before a device run, as docs/gpu.md says)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_runner_s_dry_run_leaves_each_step_s_output_and_status(tmp_path):
    done = subprocess.run(["bash", str(ROOT / "tools" / "device" / "run.sh"), "--dry-run"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable,
                               "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "steps.txt").read_text().split("\n")[:2] == ["versions 0", "gpu_check 0"]
    assert "flexflow-dask" in (tmp_path / "versions.log").read_text()
    assert "nothing to check" in (tmp_path / "gpu_check.log").read_text()


def test_a_failing_step_fails_the_run_and_the_rest_still_runs(tmp_path):
    fails = tmp_path / "python"
    fails.write_text("#!/bin/sh\nexit 3\n")
    fails.chmod(0o755)
    done = subprocess.run(["bash", str(ROOT / "tools" / "device" / "run.sh"), "--dry-run"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OUT": str(tmp_path / "out"),
                               "PYTHON": str(fails)})
    assert done.returncode == 1
    assert (tmp_path / "out" / "steps.txt").read_text().split() == [
        "versions", "3", "gpu_check", "3"]


def test_the_wheelhouse_leaves_out_what_the_image_has():
    sys.path.insert(0, str(ROOT / "tools" / "device"))
    try:
        import wheelhouse
    finally:
        sys.path.pop(0)
    names = {spec.split("=")[0].split("<")[0] for spec in wheelhouse.MISSING_ON_THE_IMAGE}
    assert {"dask", "distributed", "dask-cuda", "cryptography"} <= names
    assert not names & {"torch", "numpy", "cupy-cuda13x", "pandas", "psutil"}
