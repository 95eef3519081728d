"""Models exported from PyTorch import with their weights, give PyTorch's outputs, and train
like PyTorch: the losses of a few SGD steps match step by step."""

import numpy as np
import pytest
import torch

from flexflow.core import LossType, SGDOptimizer

from .torch_models import (CNN, MLP, Encoder, ResNet18, export, ff_inference, imported,
                           randomize_batch_norm)

BATCH = 4
# (name, constructor, input shape without the batch dim)
MODELS = {
    "mlp": (MLP, (784,)),
    "cnn": (CNN, (3, 32, 32)),
    "resnet18": (ResNet18, (3, 48, 48)),
    "encoder": (Encoder, (6, 32)),
}
# The TorchScript exporter for every model; the default (dynamo) one, slow to start, for the
# encoder, whose graph (opset 20: Gelu, LayerNormalization) differs most between the two.
EXPORTERS = [("mlp", False), ("cnn", False), ("resnet18", False), ("encoder", False),
             ("encoder", True)]


def build(name):
    torch.manual_seed(0)
    model = MODELS[name][0]()
    randomize_batch_norm(model)
    return model


def batch_of(name, seed=1):
    shape = (BATCH,) + MODELS[name][1]
    return torch.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@pytest.fixture(scope="module")
def exported():
    cache = {}

    def get(name, dynamo):
        if (name, dynamo) not in cache:
            cache[(name, dynamo)] = export(build(name), batch_of(name), dynamo)
        return cache[(name, dynamo)]
    return get


@pytest.mark.parametrize("name, dynamo", EXPORTERS,
                         ids=[f"{n}-{'dynamo' if d else 'torchscript'}" for n, d in EXPORTERS])
def test_imported_model_gives_torch_outputs(exported, name, dynamo):
    model = build(name).eval()
    data = batch_of(name, seed=2)
    got = ff_inference(exported(name, dynamo), data.numpy())
    with torch.no_grad():
        want = model(data).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(MODELS))
def test_imported_model_trains_like_torch(exported, name):
    """Three SGD steps on the same batches: FlexFlow's losses are torch's (train mode: batch
    norms use batch statistics), and the trained models agree on new data."""
    lr, steps = 0.01, 3
    ffmodel, x, _ = imported(exported(name, False), BATCH, softmax=True)
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, lr),
                    loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    model = build(name).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    labels = np.random.default_rng(3).integers(0, 10, (steps, BATCH, 1)).astype(np.int32)
    for step in range(steps):
        data = batch_of(name, seed=10 + step)
        x.set_tensor(ffmodel, data.numpy())
        ffmodel.label_tensor.set_tensor(ffmodel, labels[step])
        ff_loss = ffmodel.train_step()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(data), torch.tensor(labels[step][:, 0],
                                                                           dtype=torch.long))
        loss.backward()
        optimizer.step()
        assert ff_loss == pytest.approx(loss.item(), rel=1e-4)
    data = batch_of(name, seed=99)
    x.set_tensor(ffmodel, data.numpy())
    ffmodel.forward(training=False)
    with torch.no_grad():
        want = torch.softmax(model.eval()(data), -1).numpy()
    np.testing.assert_allclose(ffmodel.get_last_layer().get_output_tensor().get_tensor(ffmodel),
                               want, rtol=1e-4, atol=1e-5)


def test_imported_transformer_runs_data_parallel_on_two_devices(exported):
    """The default strategy splits the batch where a layer can split its dim 0 (the attention's
    reshapes regroup samples, so they run whole): same outputs as PyTorch."""
    data = batch_of("encoder", seed=2)
    got = ff_inference(exported("encoder", False), data.numpy(),
                       argv=["-ll:gpu", "2", "--in-process"])
    with torch.no_grad():
        want = build("encoder").eval()(data).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
