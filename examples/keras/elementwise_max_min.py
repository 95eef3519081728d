"""Maximum and Minimum layers of two Dense branches, Adam and mean squared error on 300 random
samples; the loss should fall."""

import numpy as np

from flexflow.keras.layers import Dense, Input, Maximum, Minimum, Subtract
from flexflow.keras.models import Model
from flexflow.keras.optimizers import Adam

from example_data import script_args


def top_level_task():
    args = script_args(epochs=10)
    rng = np.random.default_rng(0)
    x1 = rng.random((300, 8), dtype=np.float32)
    x2 = rng.random((300, 8), dtype=np.float32)
    y = (np.maximum(x1, x2) - np.minimum(x1, x2))[:, :4]

    first, second = Input(shape=(8,)), Input(shape=(8,))
    a, b = Dense(4)(first), Dense(4)(second)
    out = Subtract()([Maximum()([a, b]), Minimum()([a, b])])
    model = Model([first, second], out)
    model.compile(optimizer=Adam(learning_rate=0.01), loss="mean_squared_error",
                  metrics=["mean_squared_error"])
    history = model.fit([x1, x2], y, epochs=args.epochs)
    print(f"mean squared error: {history.history['loss'][0]:.4f} -> "
          f"{history.history['loss'][-1]:.4f}")


if __name__ == "__main__":
    print("Element-wise maximum and minimum")
    top_level_task()
