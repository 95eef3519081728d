"""The ONNX examples run as their users run them: a `*_pt.py` script exports a PyTorch model,
then the FlexFlow program imports the file and trains (tiny settings, synthetic data)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "onnx"
ELAPSED = re.compile(r"^epochs 1, ELAPSED TIME = \d+\.\d{4}s, THROUGHPUT = \d+\.\d{2} "
                     r"samples/s$", re.MULTILINE)
ONE_BLAS_THREAD = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}


def run(script: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args],
                            env={**os.environ, **ONE_BLAS_THREAD}, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, f"{script}:\n{result.stdout}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.mark.parametrize("name", ["mnist_mlp", "cifar10_cnn"])
def test_exported_model_imports_and_trains(name, tmp_path):
    onnx_file = str(tmp_path / f"{name}.onnx")
    assert f"wrote {onnx_file}" in run(f"{name}_pt.py", "-f", onnx_file)
    output = run(f"{name}.py", "-f", onnx_file, "-b", "8", "-e", "1", "--num-samples", "16",
                 "-d", str(tmp_path))
    assert ELAPSED.search(output), output
