"""Reshape layers: flat MNIST rows to 28x28 and back, then an MLP."""

from flexflow.keras.layers import Dense, Input, Reshape
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args


def top_level_task():
    args = script_args(epochs=10)
    (x_train, y_train), (x_test, y_test) = mnist_data((784,), args.num_samples)
    inputs = Input(shape=(784,))
    t = Reshape((28, 28))(inputs)
    t = Reshape((784,))(t)
    t = Dense(512, activation="relu")(t)
    t = Dense(512, activation="relu")(t)
    model = Model(inputs, Dense(10, activation="softmax")(t))
    print(model.summary())
    model.compile(optimizer=SGD(learning_rate=0.05, momentum=0.9),
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.MNIST_MLP))
    model.evaluate(x_test, y_test)


if __name__ == "__main__":
    print("Reshape layers, MNIST MLP")
    top_level_task()
