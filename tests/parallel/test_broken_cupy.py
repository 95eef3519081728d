"""A machine whose CuPy is installed but broken is not taken for one without GPUs: the run goes
on with NumPy, and a warning names the error (scheduler/cluster.py)."""

import sys
import types

import numpy
import pytest

from flexflow.scheduler import cluster


def installed_cupy(monkeypatch, is_available):
    cuda = types.SimpleNamespace(is_available=is_available,
                                 runtime=types.SimpleNamespace(getDeviceCount=lambda: 1))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    cluster._warn_once.cache_clear()


def test_a_cupy_that_fails_is_named_in_a_warning(monkeypatch):
    def fails():
        raise RuntimeError("CUDA driver version is insufficient for CUDA runtime version")
    installed_cupy(monkeypatch, fails)
    with pytest.warns(RuntimeWarning, match=r"CuPy is installed but cannot use a GPU here "
                                            r"\(RuntimeError: CUDA driver version"):
        assert cluster.array_module() is numpy
    assert cluster.gpu_count() == 0


def test_no_cupy_or_no_gpu_is_quietly_numpy(monkeypatch, recwarn):
    monkeypatch.setitem(sys.modules, "cupy", None)  # not installed: the import fails
    assert cluster.array_module() is numpy and cluster.gpu_count() == 0
    installed_cupy(monkeypatch, lambda: False)
    assert cluster.array_module() is numpy and cluster.gpu_count() == 0
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_a_usable_gpu_is_cupy(monkeypatch):
    installed_cupy(monkeypatch, lambda: True)
    assert cluster.array_module() is sys.modules["cupy"]
    assert cluster.array_module(cpu_only=True) is numpy
