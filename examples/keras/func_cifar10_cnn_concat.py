"""Two named inputs (fed the same images) and three convolution branches joined by two
Concatenate(axis=1) layers; every layer named explicitly; fit([x, x], y)."""

from flexflow.keras.layers import Concatenate, Conv2D, Dense, Flatten, Input, MaxPooling2D
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import cifar10_data, script_args


def conv(filters, name):
    return Conv2D(filters, kernel_size=(3, 3), padding=(1, 1), activation="relu", name=name)


def top_level_task():
    args = script_args(epochs=160, image_size=32)
    (x_train, y_train), (x_test, y_test) = cifar10_data(args.num_samples or 10000,
                                                        args.image_size)
    first = Input(shape=x_train.shape[1:], name="input_a")
    second = Input(shape=x_train.shape[1:], name="input_b")
    a = conv(32, "conv_a")(first)
    b = conv(32, "conv_b")(second)
    c = conv(32, "conv_c")(second)
    t = Concatenate(axis=1, name="concat_bc")([b, c])
    t = Concatenate(axis=1, name="concat_abc")([a, t])
    t = MaxPooling2D(pool_size=(2, 2), strides=(2, 2), name="pool_1")(t)
    t = conv(64, "conv_d")(t)
    t = MaxPooling2D(pool_size=(2, 2), strides=(2, 2), name="pool_2")(t)
    t = Dense(512, activation="relu", name="dense_1")(Flatten(name="flat")(t))
    model = Model([first, second], Dense(10, activation="softmax", name="dense_2")(t))
    print(model.summary())
    model.compile(optimizer=SGD(learning_rate=0.02), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit([x_train, x_train], y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.CIFAR10_CNN))
    model.evaluate([x_test, x_test], y_test)


if __name__ == "__main__":
    print("Functional API, CIFAR-10 CNN with two inputs and concatenated branches")
    top_level_task()
