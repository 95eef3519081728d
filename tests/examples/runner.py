"""Runs an example script the way its users do (a fresh Python process) and checks its exit."""

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "native"
# The per-batch metrics line FFModel.fit writes to stderr; groups: correct, samples so far.
METRICS = re.compile(r"^\[Metrics\] accuracy: [\d.]+% \((\d+) / (\d+)\)", re.MULTILINE)

# On a machine shared by several test runs, BLAS threads that outnumber the free cores spin
# against each other (measured: the MNIST examples ran 6-16x slower); one thread per run avoids
# it. A value already set in the environment wins.
SINGLE_THREADED_BLAS = {name: os.environ.get(name, "1")
                        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}


def run_example(script: str, *args: str, env: dict | None = None, timeout: float = 120,
                check: bool = True) -> subprocess.CompletedProcess:
    """`python examples/native/<script> <args>` with `env` added to the environment; with
    `check`, fail unless it exits with status 0 (showing its output)."""
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args],
                            env={**os.environ, **SINGLE_THREADED_BLAS, **(env or {})},
                            capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, (f"{script} exited with {result.returncode}\n"
                                        f"stdout:\n{result.stdout}\n"
                                        f"stderr:\n{result.stderr[-3000:]}")
    return result
