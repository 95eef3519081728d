"""The strategy-invariance tests again, on a real cluster of worker processes started with the
`dask scheduler` / `dask worker` commands and reached through `--scheduler ADDRESS`."""

import pytest

from flexflow.scheduler import cluster as cluster_module

from .cluster import loopback_cluster
from .models import CASES, MODELS
from .test_strategy_invariance import assert_same_run, reference, train


@pytest.fixture(scope="module")
def scheduler_address():
    with loopback_cluster(workers=4) as address:
        yield address
        cluster_module.disconnect(address)


@pytest.mark.parametrize("name, kind, n", CASES)
def test_strategy_on_a_real_cluster(scheduler_address, name, kind, n):
    run = train(MODELS[name], ["--scheduler", scheduler_address, "-ll:gpu", str(n)], kind, n)
    assert_same_run(run, reference(name))
