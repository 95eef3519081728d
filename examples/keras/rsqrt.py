"""rsqrt of a sum of two inputs (Tensor `+` builds an Add layer), checked against NumPy."""

import numpy as np

from flexflow.keras.backend.internal import Rsqrt
from flexflow.keras.layers import Input
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD


def top_level_task():
    first, second = Input(shape=(5,)), Input(shape=(5,))
    model = Model([first, second], Rsqrt()(first + second))
    model.compile(optimizer=SGD(), loss="mean_squared_error")
    rng = np.random.default_rng(0)
    a, b = rng.random((64, 5), dtype=np.float32) + 0.5, rng.random((64, 5), dtype=np.float32)
    error = np.abs(model.predict([a, b]) - 1 / np.sqrt(a + b)).max()
    print(f"largest difference from numpy: {error:.2e}")
    assert error < 1e-5


if __name__ == "__main__":
    print("rsqrt")
    top_level_task()
