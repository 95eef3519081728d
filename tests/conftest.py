"""`--kernels vendor|reference` runs the whole suite on one kernel path (ops/vendor.py); the
environment variable is set too, so the processes the tests start run the same kernels."""

import os

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
