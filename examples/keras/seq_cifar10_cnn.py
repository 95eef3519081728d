"""CIFAR-10 CNN as a Sequential model: four padded 3x3 convolutions in two blocks with max
pooling, Dense 512, Dense 10, softmax; SGD."""

from flexflow.keras.layers import Input
from flexflow.keras.models import Sequential
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import cifar10_data, script_args
from example_models import cifar_cnn_body, cifar_cnn_head


def top_level_task():
    args = script_args(epochs=80, image_size=32)
    (x_train, y_train), (x_test, y_test) = cifar10_data(args.num_samples or 10000,
                                                        args.image_size)
    model = Sequential([Input(shape=x_train.shape[1:])] + cifar_cnn_body() + cifar_cnn_head())
    print(model.summary())
    model.compile(optimizer=SGD(learning_rate=0.02), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.CIFAR10_CNN))
    model.evaluate(x_test, y_test)


if __name__ == "__main__":
    print("Sequential model, CIFAR-10 CNN")
    top_level_task()
