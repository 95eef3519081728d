"""Tests of the bench/ scripts, at small sizes."""

import importlib
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"


@contextmanager
def bench_module(name: str):
    """bench/`name`.py imported with bench/ on the path, as its scripts have it (their
    imports of each other), and the path restored after."""
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def bench_fixture(name: str):
    """A module-scoped fixture giving bench/`name`.py (`bench_module`)."""
    @pytest.fixture(scope="module")
    def bench():
        with bench_module(name) as module:
            yield module
    return bench
