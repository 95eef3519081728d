"""Two convolutions side by side on the same input, joined along the channels with
`concatenate` (FlexFlow's default axis 1: the channels of NCHW tensors)."""

from flexflow.keras.layers import Conv2D, Dense, Flatten, Input, MaxPooling2D, concatenate
from flexflow.keras.models import Model
from flexflow.keras.optimizers import Adam

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args


def top_level_task():
    args = script_args(epochs=5)
    (x_train, y_train), (x_test, y_test) = mnist_data((1, 28, 28), args.num_samples)
    inputs = Input(shape=(1, 28, 28))
    left = Conv2D(8, kernel_size=(3, 3), strides=(2, 2), activation="relu")(inputs)
    right = Conv2D(8, kernel_size=(3, 3), strides=(2, 2), activation="relu")(inputs)
    t = MaxPooling2D(pool_size=(2, 2))(concatenate([left, right]))
    t = Dense(128, activation="relu")(Flatten()(t))
    model = Model(inputs, Dense(10, activation="softmax")(t))
    print(model.summary())
    model.compile(optimizer=Adam(learning_rate=0.002), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.MNIST_CNN))
    model.evaluate(x_test, y_test)


if __name__ == "__main__":
    print("Functional API, MNIST CNN with concatenated branches")
    top_level_task()
