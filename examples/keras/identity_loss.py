"""The identity loss: the model output (here the per-sample sum of squares from
backend.sum) is itself minimised; the labels are not used."""

import numpy as np

from flexflow.keras import backend as K
from flexflow.keras.layers import Dense, Input, Multiply
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

from example_data import script_args


def top_level_task():
    args = script_args(epochs=5)
    x = np.random.default_rng(0).random((256, 10), dtype=np.float32)
    inputs = Input(shape=(10,))
    t = Dense(10)(inputs)
    out = K.sum(Multiply()([t, t]), axis=1, keepdims=True)
    model = Model(inputs, out)
    model.compile(optimizer=SGD(learning_rate=0.01), loss="identity",
                  metrics=["mean_absolute_error"])
    history = model.fit(x, np.zeros((256, 1), np.float32), epochs=args.epochs)
    print(f"loss: {history.history['loss'][0]:.4f} -> {history.history['loss'][-1]:.4f}")


if __name__ == "__main__":
    print("Identity loss")
    top_level_task()
