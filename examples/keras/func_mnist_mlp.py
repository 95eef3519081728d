"""MNIST MLP in the functional API, with a metric given as an object."""

from flexflow.keras import losses, metrics
from flexflow.keras.layers import Dense, Input
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args


def top_level_task():
    args = script_args(epochs=10)
    (x_train, y_train), (x_test, y_test) = mnist_data((784,), args.num_samples)
    inputs = Input(shape=(784,))
    t = Dense(512, activation="relu")(inputs)
    t = Dense(512, activation="relu")(t)
    outputs = Dense(10, activation="softmax")(t)
    model = Model(inputs, outputs)
    print(model.summary())
    model.compile(optimizer=SGD(learning_rate=0.05, momentum=0.9),
                  loss=losses.SparseCategoricalCrossentropy(),
                  metrics=[metrics.Accuracy(), metrics.SparseCategoricalCrossentropy()])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.MNIST_MLP))
    model.evaluate(x_test, y_test)


if __name__ == "__main__":
    print("Functional API, MNIST MLP")
    top_level_task()
