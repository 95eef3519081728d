"""A Sequential and a functional Keras model with weights copied from equivalent torch.nn models
train along the same loss curve as PyTorch for 20 steps (relative difference <= 1e-4).

The Keras losses are read per batch from fit's batch logs (shuffle=False, so batch i is samples
i*B .. (i+1)*B-1 in both frameworks)."""

import numpy as np
import torch
from torch import nn

from flexflow.keras.callbacks import Callback
from flexflow.keras.layers import (BatchNormalization, Concatenate, Conv2D, Dense, Flatten,
                                   Input, MaxPooling2D, add)
from flexflow.keras.models import Model, Sequential
from flexflow.keras.optimizers import SGD, Adam

B = 8
STEPS = 20
RTOL = 1e-4


class BatchLosses(Callback):
    def on_train_begin(self, logs=None):
        self.losses = []

    def on_batch_end(self, batch, logs=None):
        self.losses.append(logs["loss"])


def learnable_classes(rng, x, classes: int) -> np.ndarray:
    """Labels a linear function of x decides, so that the loss falls within 20 steps."""
    flat = x.reshape(len(x), -1)
    return (flat @ rng.normal(size=(flat.shape[1], classes))).argmax(axis=1)


def keras_curve(model, x, y) -> np.ndarray:
    recorder = BatchLosses()
    model.fit(x, y, epochs=1, shuffle=False, verbose=0, callbacks=[recorder])
    return np.array(recorder.losses)


def torch_curve(net, optimizer, inputs, target, loss_fn) -> np.ndarray:
    losses = []
    for step in range(STEPS):
        batch = slice(step * B, (step + 1) * B)
        optimizer.zero_grad()
        loss = loss_fn(net(*(torch.tensor(x[batch]) for x in inputs)), target[batch])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return np.array(losses)


def test_sequential_cnn_matches_pytorch():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                        nn.BatchNorm2d(4, eps=1e-3, momentum=0.01), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(4 * 4 * 4, 16), nn.ReLU(), nn.Linear(16, 5))
    with torch.no_grad():  # non-trivial batch-norm affine parameters
        net[2].weight.uniform_(0.5, 1.5)
        net[2].bias.uniform_(-0.5, 0.5)
    model = Sequential([
        Conv2D(4, input_shape=(3, 8, 8), kernel_size=(3, 3), padding="same", activation="relu"),
        BatchNormalization(), MaxPooling2D((2, 2)), Flatten(),
        Dense(16, activation="relu"), Dense(5, activation="softmax")])
    model.compile(SGD(learning_rate=0.05, momentum=0.9), "sparse_categorical_crossentropy",
                  ["accuracy"])
    for index, module in zip([0, 1, 4, 5], [net[0], net[2], net[5], net[7]]):
        weights = [p.detach().numpy() for p in module.parameters()]
        if isinstance(module, nn.BatchNorm2d):
            weights += [module.running_mean.numpy(), module.running_var.numpy()]
        model.get_layer(index=index).set_weights(model.ffmodel, weights)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS * B, 3, 8, 8)).astype(np.float32)
    y = learnable_classes(rng, x, 5).astype(np.int32).reshape(-1, 1)
    ours = keras_curve(model, x, y)
    theirs = torch_curve(net, torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9), [x],
                         torch.tensor(y[:, 0]).long(), nn.CrossEntropyLoss())
    np.testing.assert_allclose(ours, theirs, rtol=RTOL)
    assert theirs[-5:].mean() < theirs[:5].mean()  # it learns


class TwoBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(12, 16), nn.Linear(6, 16)
        self.p, self.q = nn.Linear(32, 8), nn.Linear(32, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, a, b):
        h = torch.cat([torch.relu(self.a(a)), torch.tanh(self.b(b))], dim=1)
        return self.out(self.p(h) + torch.sigmoid(self.q(h)))


def test_functional_model_matches_pytorch():
    torch.manual_seed(1)
    net = TwoBranch()
    in_a, in_b = Input((12,)), Input((6,))
    dense_a, dense_b = Dense(16, activation="relu"), Dense(16, activation="tanh")
    h = Concatenate(axis=1)([dense_a(in_a), dense_b(in_b)])
    dense_p, dense_q = Dense(8), Dense(8, activation="sigmoid")
    dense_out = Dense(3, activation="softmax")
    model = Model([in_a, in_b], dense_out(add([dense_p(h), dense_q(h)])))
    model.compile(Adam(learning_rate=0.01, epsilon=1e-12), "categorical_crossentropy",
                  ["accuracy"])
    for layer, module in [(dense_a, net.a), (dense_b, net.b), (dense_p, net.p),
                          (dense_q, net.q), (dense_out, net.out)]:
        layer.set_weights(model.ffmodel, module.weight.detach().numpy(),
                          module.bias.detach().numpy())

    rng = np.random.default_rng(1)
    a = rng.normal(size=(STEPS * B, 12)).astype(np.float32)
    b = rng.normal(size=(STEPS * B, 6)).astype(np.float32)
    classes = learnable_classes(rng, np.concatenate([a, b], axis=1), 3)
    y = np.eye(3, dtype=np.float32)[classes]
    ours = keras_curve(model, [a, b], y)
    theirs = torch_curve(net, torch.optim.Adam(net.parameters(), lr=0.01, eps=1e-12), [a, b],
                         torch.tensor(classes).long(), nn.CrossEntropyLoss())
    np.testing.assert_allclose(ours, theirs, rtol=RTOL)
    assert theirs[-5:].mean() < theirs[:5].mean()
