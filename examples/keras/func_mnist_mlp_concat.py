"""Models as layers: four small sub-models, each defined on an Input of 256 features, are applied
to one Input of 784 features (`sub_model(tensor)` rebuilds their layers for the new width) and
their outputs concatenated."""

from flexflow.keras.layers import Concatenate, Dense, Input
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args


def branch():
    inputs = Input(shape=(256,))
    return Model(inputs, Dense(128, activation="relu")(Dense(256, activation="relu")(inputs)))


def top_level_task():
    args = script_args(epochs=5)
    (x_train, y_train), (x_test, y_test) = mnist_data((784,), args.num_samples)
    inputs = Input(shape=(784,))
    merged = Concatenate(axis=1)([branch()(inputs) for _ in range(4)])
    model = Model(inputs, Dense(10, activation="softmax")(merged))
    print(model.summary())
    model.compile(optimizer=SGD(learning_rate=0.05, momentum=0.9),
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.MNIST_MLP))
    model.evaluate(x_test, y_test)


if __name__ == "__main__":
    print("Functional API, MNIST MLP with concatenated sub-models")
    top_level_task()
