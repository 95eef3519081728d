"""Runs scripts through the launcher (`python -m flexflow`) in a fresh process, as users do."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from ..examples.runner import EXAMPLES, SINGLE_THREADED_BLAS

SCRIPTS = Path(__file__).resolve().parent / "scripts"
KERAS_EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "keras"
TINY_MLP = SCRIPTS / "tiny_mlp.py"
STEP_LOSS = re.compile(r"^step (\d+) loss (\S+)$", re.MULTILINE)


def launch(*args: str, launcher: bool = True, cwd=None, env: dict | None = None,
           timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """`python -m flexflow <args>` (or `python <args>` without the launcher); with `check`,
    fail unless it exits with status 0, showing its output."""
    command = [sys.executable, *(["-m", "flexflow"] if launcher else []), *map(str, args)]
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, **SINGLE_THREADED_BLAS, **(env or {})})
    if check:
        assert result.returncode == 0, (f"{' '.join(command)} exited with {result.returncode}\n"
                                        f"stdout:\n{result.stdout[-3000:]}\n"
                                        f"stderr:\n{result.stderr[-3000:]}")
    return result


def step_losses(result: subprocess.CompletedProcess) -> list[float]:
    losses = [float(loss) for _, loss in STEP_LOSS.findall(result.stdout)]
    assert losses, f"no 'step N loss X' lines in:\n{result.stdout}"
    return losses


__all__ = ["EXAMPLES", "KERAS_EXAMPLES", "SCRIPTS", "TINY_MLP", "launch", "step_losses"]
