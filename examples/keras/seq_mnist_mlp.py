"""MNIST MLP as a Sequential model: Dense 512 (seeded Glorot kernel, zero bias), ReLU as its own
layer, dropout, Dense 512, Dense 10, softmax. Trains until an epoch's accuracy passes
ModelAccuracy.MNIST_MLP (VerifyMetrics fails the run otherwise), then evaluates the test set."""

from flexflow.keras import initializers
from flexflow.keras.layers import Activation, Dense, Dropout
from flexflow.keras.models import Sequential
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args


def top_level_task():
    args = script_args(epochs=20)
    (x_train, y_train), (x_test, y_test) = mnist_data((784,), args.num_samples)

    model = Sequential()
    model.add(Dense(512, input_shape=(784,),
                    kernel_initializer=initializers.GlorotUniform(123),
                    bias_initializer=initializers.Zeros()))
    model.add(Activation("relu"))
    model.add(Dropout(0.2))
    model.add(Dense(512, activation="relu"))
    model.add(Dropout(0.2))
    model.add(Dense(10))
    model.add(Activation("softmax"))
    print(model.summary())

    model.compile(optimizer=SGD(learning_rate=0.05, momentum=0.9),
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.MNIST_MLP))
    loss, accuracy, _ = model.evaluate(x_test, y_test)
    print(f"test accuracy: {100 * accuracy:.2f}%")


if __name__ == "__main__":
    print("Sequential model, MNIST MLP")
    top_level_task()
