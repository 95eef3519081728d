"""A fit of a small MLP that goes on for a long time, for tests that end a run from outside: it
prints "fit starts" once the model has compiled. With `--fake-gpus`, the cluster `-ll:gpu N`
starts is the GPU path's (dask_cuda's LocalCUDACluster, faked by a LocalCluster of processes)."""

import sys

from flexflow.core import *

from tiny_data import compiled_mlp, samples

if "--fake-gpus" in sys.argv:
    import pytest

    import fake_gpus
    from flexflow.scheduler import cluster

    fake_gpus.install(pytest.MonkeyPatch(), cluster, 2)


def top_level_task():
    ffconfig = FFConfig()
    ffmodel, x = compiled_mlp(ffconfig, 0.01)
    xs, ys = samples(ffconfig.batch_size * 20)
    print("fit starts", flush=True)
    ffmodel.fit(x=ffmodel.create_data_loader(x, xs),
                y=ffmodel.create_data_loader(ffmodel.label_tensor, ys), epochs=100_000)


if __name__ == "__main__":  # (the GPU path's worker processes import this module again)
    top_level_task()
