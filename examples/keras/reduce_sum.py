"""backend.sum over one axis, over several, and with keepdims, checked against NumPy on the
model's predictions."""

import numpy as np

from flexflow.keras import backend as K
from flexflow.keras.layers import Concatenate, Flatten, Input, Reshape
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD


def top_level_task():
    inputs = Input(shape=(2, 3, 4))
    by_axis = K.sum(inputs, axis=3)                                     # (2, 3)
    by_axes = K.sum(inputs, axis=[2, 3])                                # (2,)
    kept = K.sum(inputs, axis=1, keepdims=True)                         # (1, 3, 4)
    out = Concatenate(axis=1)([Flatten()(by_axis), by_axes, Flatten()(kept)])
    model = Model(inputs, Reshape((20,))(out))
    model.compile(optimizer=SGD(), loss="mean_squared_error")
    x = np.random.default_rng(0).random((64, 2, 3, 4), dtype=np.float32)
    expected = np.concatenate([x.sum(axis=3).reshape(64, -1), x.sum(axis=(2, 3)),
                               x.sum(axis=1).reshape(64, -1)], axis=1)
    error = np.abs(model.predict(x) - expected).max()
    print(f"largest difference from numpy: {error:.2e}")
    assert error < 1e-5


if __name__ == "__main__":
    print("backend.sum")
    top_level_task()
