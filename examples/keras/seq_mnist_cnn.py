"""MNIST CNN as a Sequential model built from a list starting with Input((1, 28, 28)): a strided
3x3 convolution, Dense 128, Dense 10 with softmax, trained with Adam; reports the test accuracy.

The network is smaller than FlexFlow's example (two stride-1 convolutions of 32 and 64 channels,
about 100x the CPU time) so that it trains in seconds per epoch on CPU numpy; two epochs reach
about 97-98% test accuracy."""

from flexflow.keras.layers import Dense, Input
from flexflow.keras.models import Sequential
from flexflow.keras.optimizers import Adam

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args
from example_models import mnist_cnn_body


def top_level_task():
    args = script_args(epochs=2)
    (x_train, y_train), (x_test, y_test) = mnist_data((1, 28, 28), args.num_samples)
    model = Sequential([Input(shape=(1, 28, 28))] + mnist_cnn_body()
                       + [Dense(128, activation="relu"), Dense(10, activation="softmax")])
    print(model.summary())
    model.compile(optimizer=Adam(learning_rate=0.001), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.MNIST_CNN, early_stop=False))
    loss, accuracy, _ = model.evaluate(x_test, y_test)
    print(f"test accuracy: {100 * accuracy:.2f}%")


if __name__ == "__main__":
    print("Sequential model, MNIST CNN")
    top_level_task()
