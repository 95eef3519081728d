"""Weight transfer between Sequential CNNs, finding layers by name (get_layer(name=...)): the
student gets the teacher's convolution and dense weights and starts at its accuracy."""

from flexflow.keras.layers import Conv2D, Dense, Flatten, Input, MaxPooling2D
from flexflow.keras.models import Sequential
from flexflow.keras.optimizers import Adam

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args

TRANSFERRED = ("conv1", "dense1", "dense2")


def cnn(prefix: str):
    model = Sequential([
        Input(shape=(1, 28, 28)),
        Conv2D(16, kernel_size=(3, 3), strides=(2, 2), activation="relu", name=f"{prefix}conv1"),
        MaxPooling2D(pool_size=(2, 2), strides=(2, 2)), Flatten(),
        Dense(64, activation="relu", name=f"{prefix}dense1"),
        Dense(10, activation="softmax", name=f"{prefix}dense2")])
    model.compile(optimizer=Adam(learning_rate=0.002), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def top_level_task():
    args = script_args(epochs=5)
    (x_train, y_train), (x_test, y_test) = mnist_data((1, 28, 28), args.num_samples)
    teacher = cnn("teacher_")
    teacher.fit(x_train, y_train, epochs=1)
    _, teacher_accuracy = teacher.evaluate(x_test, y_test, verbose=0)
    print(f"teacher test accuracy: {100 * teacher_accuracy:.2f}%")

    student = cnn("student_")
    for name in TRANSFERRED:
        weights = teacher.get_layer(name=f"teacher_{name}").get_weights(teacher.ffmodel)
        student.get_layer(name=f"student_{name}").set_weights(student.ffmodel, *weights)
    _, student_accuracy = student.evaluate(x_test, y_test, verbose=0)
    print(f"student test accuracy before training: {100 * student_accuracy:.2f}%")
    student.fit(x_train, y_train, epochs=args.epochs,
                callbacks=accuracy_checks(args, ModelAccuracy.MNIST_CNN))


if __name__ == "__main__":
    print("Sequential model, MNIST CNN net2net")
    top_level_task()
