"""The outputs of two functional sub-models (each with its own input) concatenated and
classified by a head: Model([input_1, input_2], head(concat(model1.output, model2.output)))."""

from flexflow.keras.layers import Concatenate, Conv2D, Flatten, Input, MaxPooling2D
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import cifar10_data, script_args
from example_models import apply, cifar_cnn_head


def branch(image_shape: tuple):
    inputs = Input(shape=image_shape)
    return Model(inputs, apply([Conv2D(32, kernel_size=(3, 3), padding=(1, 1),
                                       activation="relu"),
                                MaxPooling2D(pool_size=(2, 2))], inputs))


def top_level_task():
    args = script_args(epochs=160, image_size=32)
    (x_train, y_train), (x_test, y_test) = cifar10_data(args.num_samples or 10000,
                                                        args.image_size)
    model1, model2 = branch(x_train.shape[1:]), branch(x_train.shape[1:])
    merged = Concatenate(axis=1)([model1.output, model2.output])
    t = apply([Conv2D(64, kernel_size=(3, 3), padding=(1, 1), activation="relu"),
               MaxPooling2D(pool_size=(2, 2)), Flatten()] + cifar_cnn_head(), merged)
    model = Model([model1.input[0], model2.input[0]], t)
    print(model.summary())
    model.compile(optimizer=SGD(learning_rate=0.02), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit([x_train, x_train], y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.CIFAR10_CNN))
    model.evaluate([x_test, x_test], y_test)


if __name__ == "__main__":
    print("Functional API, CIFAR-10 CNN from two concatenated sub-models")
    top_level_task()
