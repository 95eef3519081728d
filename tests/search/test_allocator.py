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
array = numpy.ones(64 << 18, numpy.float32)  # 64 MiB, touched
del array
print((rss() - before) / (64 << 20))
"""


def kept_fraction(policy: str) -> float:
    """The share of a freed 64 MiB array the process still holds, under `policy`."""
    done = subprocess.run([sys.executable, "-c", RSS_AFTER_FREEING, policy],
                          capture_output=True, text=True, timeout=60,
                          env={"MALLOC_TRIM_THRESHOLD_": "65536", "PATH": ""})  # as Dask's
    assert done.returncode == 0, done.stderr
    return float(done.stdout)


def test_a_tuned_process_keeps_what_it_frees_and_a_default_one_returns_it():
    assert kept_fraction("kept") > 0.9
    assert kept_fraction("default") < 0.1


def test_kernel_fingerprints_tell_the_two_policies_apart():
    from flexflow.scheduler import allocator
    from flexflow.scheduler.calibration.cache import fingerprint
    assert fingerprint(cpu_only=True)["allocator"] == allocator.policy()
