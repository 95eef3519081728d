"""What Keras users expect beyond FlexFlow's Keras: validation_split, shuffling, EarlyStopping,
ModelCheckpoint, the History fit returns, predict, evaluate's values, save/load_weights."""

import tempfile
from pathlib import Path

import numpy as np

from flexflow.keras.callbacks import EarlyStopping, ModelCheckpoint
from flexflow.keras.layers import Dense, Dropout
from flexflow.keras.models import Sequential
from flexflow.keras.optimizers import Adam

from example_data import mnist_data, script_args


def mlp():
    model = Sequential([Dense(128, input_shape=(784,), activation="relu"), Dropout(0.2),
                        Dense(10, activation="softmax")])
    model.compile(optimizer=Adam(learning_rate=0.001), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def top_level_task():
    args = script_args(epochs=5)
    (x_train, y_train), (x_test, y_test) = mnist_data((784,), args.num_samples)
    folder = Path(tempfile.mkdtemp())
    model = mlp()
    history = model.fit(
        x_train, y_train, epochs=args.epochs, validation_split=0.1, shuffle=True,
        callbacks=[EarlyStopping(monitor="val_loss", patience=1, restore_best_weights=True),
                   ModelCheckpoint(str(folder / "best.npz"), save_best_only=True)])
    print(f"epochs run: {len(history.epoch)}, val_accuracy per epoch: "
          f"{[round(a, 4) for a in history.history['val_accuracy']]}")
    loss, accuracy = model.evaluate(x_test, y_test)
    print(f"test loss {loss:.4f}, test accuracy {100 * accuracy:.2f}%")

    restored = mlp()
    restored.load_weights(folder / "best.npz")
    same = np.array_equal(restored.predict(x_test[:100]), model.predict(x_test[:100]))
    print(f"predictions of the reloaded best weights equal the model's: {same}")


if __name__ == "__main__":
    print("Keras extras: validation, early stopping, checkpoints, predict")
    top_level_task()
