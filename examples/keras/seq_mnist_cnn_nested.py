"""Nested models: a Sequential CNN front end (ending in Flatten) and a functional MLP head, both
added to an outer Sequential, which trains them as one model."""

from flexflow.keras.layers import Conv2D, Dense, Flatten, Input, MaxPooling2D
from flexflow.keras.models import Model, Sequential
from flexflow.keras.optimizers import Adam

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args


def top_level_task():
    args = script_args(epochs=5)
    (x_train, y_train), (x_test, y_test) = mnist_data((1, 28, 28), args.num_samples)

    front = Sequential([Input(shape=(1, 28, 28)),
                        Conv2D(16, kernel_size=(3, 3), strides=(2, 2), activation="relu"),
                        MaxPooling2D(pool_size=(2, 2)), Flatten()])
    features = Input(shape=front.output.shape_without_batch)
    hidden = Dense(128, activation="relu")(features)
    head = Model(features, Dense(10, activation="softmax")(hidden))

    model = Sequential()
    model.add(front)
    model.add(head)
    print(model.summary())
    model.compile(optimizer=Adam(learning_rate=0.002), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.MNIST_CNN))
    model.evaluate(x_test, y_test)


if __name__ == "__main__":
    print("Nested Sequential and functional models, MNIST CNN")
    top_level_task()
