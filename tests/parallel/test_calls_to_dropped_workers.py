"""A call to a worker (Client.run) that the scheduler has already dropped raises WorkerLost at
once: Dask would wait out its connect timeout (30 s) first."""

import os
import signal
import time

import pytest

from flexflow.scheduler import cluster as cluster_module
from flexflow.scheduler.cluster import WorkerLost, workers_now

from .cluster import loopback_cluster
from .models import MODELS
from .test_strategy_invariance import compiled


def test_a_call_to_a_worker_the_scheduler_dropped_raises_at_once():
    with loopback_cluster(workers=2) as address:
        ff, _ = compiled(MODELS["mlp"], ["--scheduler", address, "-ll:gpu", "2"])
        executor = ff.compiled.executor
        victim = executor.workers[1]
        pid, nanny = executor.client.run(lambda: (os.getpid(), os.getppid()),
                                         workers=[victim])[victim]
        os.kill(nanny, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while victim in workers_now(executor.client) and time.monotonic() < deadline:
            time.sleep(0.1)
        start = time.monotonic()
        with pytest.raises(WorkerLost, match=victim):
            executor.zero_gradients()
        assert time.monotonic() - start < 5
        cluster_module.disconnect(address)
