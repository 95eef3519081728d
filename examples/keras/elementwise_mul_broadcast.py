"""Multiply with broadcasting: a (10, 2) tensor times a (10, 1) tensor, both reshaped from Dense
outputs; trained on a product target."""

import numpy as np

from flexflow.keras.layers import Dense, Flatten, Input, Multiply, Reshape
from flexflow.keras.models import Model
from flexflow.keras.optimizers import Adam

from example_data import script_args


def top_level_task():
    args = script_args(epochs=10)
    rng = np.random.default_rng(0)
    x = rng.random((256, 20), dtype=np.float32)
    y = (x[:, :20].reshape(-1, 10, 2) * x[:, :10, None]).reshape(-1, 20)

    inputs = Input(shape=(20,))
    wide = Reshape((10, 2))(Dense(20)(inputs))
    narrow = Reshape((10, 1))(Dense(10)(inputs))
    model = Model(inputs, Flatten()(Multiply()([wide, narrow])))
    model.compile(optimizer=Adam(learning_rate=0.01), loss="mean_squared_error",
                  metrics=["mean_squared_error"])
    history = model.fit(x, y, epochs=args.epochs)
    print(f"mean squared error: {history.history['loss'][0]:.4f} -> "
          f"{history.history['loss'][-1]:.4f}")


if __name__ == "__main__":
    print("Broadcasting multiply")
    top_level_task()
