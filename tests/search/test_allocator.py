"""Workers keep freed memory for the next iteration (scheduler/allocator.py)."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the allocator is tuned through glibc's mallopt")

RSS_AFTER_FREEING = """
import os, sys
import numpy
from flexflow.scheduler import allocator
if sys.argv[1] == "kept":
    assert allocator.keep_freed_memory() and allocator.keep_freed_memory()
assert allocator.policy() == sys.argv[1]
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = rss()
small = [numpy.ones(1 << 20, numpy.float32) for _ in range(16)]  # 16 x 4 MiB, touched
del small
after_small = rss()
large = numpy.ones(64 << 18, numpy.float32)  # 64 MiB, touched
del large
print((after_small - before) / (64 << 20), (rss() - after_small) / (64 << 20))
"""


def kept_fractions(policy: str) -> list[float]:
    """The shares, under `policy`, of freed memory the process still holds: of 64 MiB of
    arrays of 4 MiB, and of one array of 64 MiB."""
    done = subprocess.run([sys.executable, "-c", RSS_AFTER_FREEING, policy],
                          capture_output=True, text=True, timeout=60,
                          env={"MALLOC_TRIM_THRESHOLD_": "65536", "PATH": ""})  # as Dask's
    assert done.returncode == 0, done.stderr
    return [float(share) for share in done.stdout.split()]


def test_a_tuned_process_keeps_what_it_frees_but_the_largest_arrays():
    small, large = kept_fractions("kept")
    assert small > 0.9 and large < 0.1
    assert kept_fractions("default")[0] < 0.1  # Dask's settings: every array returned


def test_kernel_fingerprints_tell_the_two_policies_apart():
    from flexflow.scheduler import allocator
    from flexflow.scheduler.calibration.cache import fingerprint
    assert fingerprint(cpu_only=True)["allocator"] == allocator.policy()


HEAP_LEFT_BY_A_MATMUL = """
import os, sys
if sys.argv[1] == "flexflow first":
    import flexflow  # noqa: F401
import torch
from flexflow.scheduler.memory_use import heap_in_use
torch.set_num_threads(1)
dy, x = torch.ones(64, 512), torch.ones(64, 2304)
before = heap_in_use()
dw = torch.mm(dy.t(), x)
del dw
print(heap_in_use() - before, os.environ.get("MKL_DISABLE_FAST_MM"))
"""


def heap_left_by_a_matmul(order: str, env: dict) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-c", HEAP_LEFT_BY_A_MATMUL, order],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "", "OMP_NUM_THREADS": "1", **env})
    assert done.returncode == 0, done.stderr
    left, setting = done.stdout.split()
    return int(left), setting


def test_importing_flexflow_first_keeps_mkl_from_holding_matmul_buffers():
    pytest.importorskip("torch")
    left, setting = heap_left_by_a_matmul("flexflow first", {})
    assert setting == "1" and left < 100_000
    # where PyTorch loads first, MKL keeps the buffers (the 2304 x 512 gradient's: ~1.6 MB)
    assert heap_left_by_a_matmul("torch first", {})[0] > 1_000_000


def test_a_users_mkl_setting_is_kept():
    done = subprocess.run([sys.executable, "-c", "import os, flexflow; "
                           "print(os.environ['MKL_DISABLE_FAST_MM'])"], capture_output=True,
                          text=True, timeout=60, env={"PATH": "", "MKL_DISABLE_FAST_MM": "0"})
    assert done.stdout.strip() == "0", done.stderr
