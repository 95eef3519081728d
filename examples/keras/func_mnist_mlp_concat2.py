"""Three inputs fed the same images: two sub-model branches on the first (one of them applied to
the other's output: sub-models nest), concatenated with the two raw inputs; fit([x, x, x], y)."""

from flexflow.keras.layers import Concatenate, Dense, Input
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args


def dense_model(width_in: int, width_out: int):
    inputs = Input(shape=(width_in,))
    return Model(inputs, Dense(width_out, activation="relu")(inputs))


def top_level_task():
    args = script_args(epochs=10)
    (x_train, y_train), (x_test, y_test) = mnist_data((784,), args.num_samples)
    first, second, third = (Input(shape=(784,)) for _ in range(3))
    wide = dense_model(784, 256)(first)
    narrow = dense_model(256, 64)(wide)
    merged = Concatenate(axis=1)([wide, narrow, second, third])
    model = Model([first, second, third], Dense(10, activation="softmax")(
        Dense(128, activation="relu")(merged)))
    print(model.summary())
    model.compile(optimizer=SGD(learning_rate=0.02, momentum=0.9),
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit([x_train, x_train, x_train], y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.MNIST_MLP))
    model.evaluate([x_test, x_test, x_test], y_test)


if __name__ == "__main__":
    print("Functional API, MNIST MLP with three inputs")
    top_level_task()
