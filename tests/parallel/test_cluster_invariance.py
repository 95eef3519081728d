"""The strategy-invariance tests again, on a real cluster of worker processes started with the
`dask scheduler` / `dask worker` commands and reached through `--scheduler ADDRESS`."""

import pytest

from flexflow.scheduler import actions as A
from flexflow.model import TRAIN_STEP
from flexflow.scheduler import cluster as cluster_module
from flexflow.scheduler.distributed import programs

from .cluster import loopback_cluster
from .models import CASES, MODELS, wide_mlp
from .test_strategy_invariance import Run, assert_same_run, compiled, fit, reference, train, weights


@pytest.fixture(scope="module")
def scheduler_address():
    with loopback_cluster(workers=4) as address:
        yield address
        cluster_module.disconnect(address)


PLANES = {"collectives": [], "messages": ["--collectives", "off"]}  # (collectives: the default)


@pytest.mark.parametrize("plane", PLANES)
@pytest.mark.parametrize("name, kind, n", CASES)
def test_strategy_on_a_real_cluster(scheduler_address, name, kind, n, plane):
    ff, inputs = compiled(MODELS[name], ["--scheduler", scheduler_address, "-ll:gpu", str(n),
                                         *PLANES[plane]], kind, n)
    taskgraph = ff.compiled.executor.taskgraph
    shared = {k for k, d in taskgraph.weight_devices.items()
              if len(d) > 1 and ff.graph.layers[k[0]].weights[k[1]].trainable}
    assert taskgraph.replicated == (shared if plane == "collectives" else set())
    assert_same_run(Run(fit(ff, inputs), weights(ff)), reference(name))


@pytest.mark.parametrize("n", [2, 4])
def test_messages_posted_early_give_the_single_device_numbers(scheduler_address, n):
    run = train(wide_mlp, ["--scheduler", scheduler_address, "-ll:gpu", str(n)], "sample", n)
    ff, _ = compiled(wide_mlp, ["-ll:gpu", str(n), "--in-process"], "sample", n)
    steps = programs(ff.compiled.executor.groups(TRAIN_STEP))
    early = [step.group.tasks[k] for device_steps in steps.values() for step in device_steps
             for k in step.early]
    assert {type(t.action) for t in early} == {A.SendWeightGrad, A.SendWeight}
    assert_same_run(run, train(wide_mlp, []))
