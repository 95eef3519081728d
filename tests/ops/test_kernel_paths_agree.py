"""The vendor and the reference kernels give the same numbers on the same inputs, for every
operator family: the GPU check's comparison (bench/gpu_check.py), run here with NumPy arrays on
both sides, so the check itself is exercised on every run."""

import importlib.util
from pathlib import Path

import numpy as np

GPU_CHECK = Path(__file__).parents[2] / "bench" / "gpu_check.py"


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", GPU_CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_vendor_kernels_equal_reference_kernels(capsys):
    gpu_check = load_gpu_check()
    failures = gpu_check.check_operators(np, "vendor")
    printed = capsys.readouterr().out
    assert failures == 0, printed
    assert printed.count("ok    vendor") == len(list(gpu_check.cases()))
