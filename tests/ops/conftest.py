"""Every operator test runs on both kernel paths: the vendor kernels (torch's ATen on our
arrays) and our reference kernels, each against the same PyTorch oracle."""

import pytest

from flexflow.ops import vendor


@pytest.fixture(autouse=True, params=vendor.KERNEL_PATHS)
def kernel_path(request):
    with vendor.kernels(request.param):
        yield request.param
