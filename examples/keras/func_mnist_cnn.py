"""MNIST CNN in the functional API, with explicit initializers, Activation and Dropout layers,
and a look at the graph: the tensor Flatten produces, where it comes from, where it goes."""

from flexflow.keras import initializers
from flexflow.keras.layers import Activation, Conv2D, Dense, Dropout, Flatten, Input
from flexflow.keras.layers import MaxPooling2D
from flexflow.keras.models import Model
from flexflow.keras.optimizers import Adam

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args


def top_level_task():
    args = script_args(epochs=5)
    (x_train, y_train), (x_test, y_test) = mnist_data((1, 28, 28), args.num_samples)
    inputs = Input(shape=(1, 28, 28))
    t = Conv2D(16, kernel_size=(3, 3), strides=(2, 2),
               kernel_initializer=initializers.GlorotUniform(123),
               bias_initializer=initializers.Zeros())(inputs)
    t = Activation("relu")(t)
    t = MaxPooling2D(pool_size=(2, 2))(t)
    t = Dropout(0.25)(t)
    t = Flatten(name="flat")(t)
    t = Dense(128, activation="relu")(t)
    model = Model(inputs, Dense(10, activation="softmax")(t))

    flat = model.get_layer(name="flat").output_tensors[0]
    print(f"'flat' output {flat.batch_shape} comes from {flat.from_layer.name} and feeds "
          f"{[layer.name for layer in flat.to_layers]}")
    model.compile(optimizer=Adam(learning_rate=0.002), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.MNIST_CNN))
    model.evaluate(x_test, y_test)


if __name__ == "__main__":
    print("Functional API, MNIST CNN")
    top_level_task()
