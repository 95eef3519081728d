"""AlexNet on CIFAR-10 images enlarged (nearest neighbour) to 229x229: five convolutions, three
max pools, two Dense 4096 layers. `--image-size N` trains on smaller images (N >= 63)."""

from flexflow.keras.layers import Conv2D, Dense, Flatten, Input, MaxPooling2D
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import cifar10_data, script_args
from example_models import apply


def alexnet_layers():
    def pool():
        return MaxPooling2D(pool_size=(3, 3), strides=(2, 2), padding="valid")
    return [Conv2D(64, kernel_size=(11, 11), strides=(4, 4), padding=(2, 2), activation="relu"),
            pool(),
            Conv2D(192, kernel_size=(5, 5), padding=(2, 2), activation="relu"), pool(),
            Conv2D(384, kernel_size=(3, 3), padding=(1, 1), activation="relu"),
            Conv2D(256, kernel_size=(3, 3), padding=(1, 1), activation="relu"),
            Conv2D(256, kernel_size=(3, 3), padding=(1, 1), activation="relu"), pool(),
            Flatten(), Dense(4096, activation="relu"), Dense(4096, activation="relu"),
            Dense(10, activation="softmax")]


def top_level_task():
    args = script_args(epochs=160, image_size=229)
    size = args.image_size
    (x_train, y_train), (x_test, y_test) = cifar10_data(args.num_samples or 10000, size)
    inputs = Input(shape=(3, size, size))
    model = Model(inputs, apply(alexnet_layers(), inputs))
    print(model.summary())
    model.compile(optimizer=SGD(learning_rate=0.01), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.CIFAR10_ALEXNET))
    model.evaluate(x_test, y_test)


if __name__ == "__main__":
    print("Functional API, CIFAR-10 AlexNet")
    top_level_task()
