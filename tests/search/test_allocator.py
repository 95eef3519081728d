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
