"""CIFAR-10 CNN in the functional API (the layer stack of seq_cifar10_cnn.py)."""

from flexflow.keras.layers import Input
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import cifar10_data, script_args
from example_models import apply, cifar_cnn_body, cifar_cnn_head


def top_level_task():
    args = script_args(epochs=160, image_size=32)
    (x_train, y_train), (x_test, y_test) = cifar10_data(args.num_samples or 10000,
                                                        args.image_size)
    inputs = Input(shape=x_train.shape[1:])
    model = Model(inputs, apply(cifar_cnn_body() + cifar_cnn_head(), inputs))
    print(model.summary())
    model.compile(optimizer=SGD(learning_rate=0.02), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.CIFAR10_CNN))
    model.evaluate(x_test, y_test)


if __name__ == "__main__":
    print("Functional API, CIFAR-10 CNN")
    top_level_task()
