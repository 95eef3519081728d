"""Weight transfer between Sequential models: a teacher MLP trains one epoch; a student of the same
shape takes its weights layer by layer (get_layer(index=i).get_weights / set_weights), so it
starts at the teacher's accuracy, then trains on."""

from flexflow.keras.layers import Dense, Dropout
from flexflow.keras.models import Sequential
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args


def mlp():
    model = Sequential([Dense(512, input_shape=(784,), activation="relu"), Dropout(0.2),
                        Dense(512, activation="relu"), Dropout(0.2),
                        Dense(10, activation="softmax")])
    model.compile(optimizer=SGD(learning_rate=0.05, momentum=0.9),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def top_level_task():
    args = script_args(epochs=5)
    (x_train, y_train), (x_test, y_test) = mnist_data((784,), args.num_samples)
    teacher = mlp()
    teacher.fit(x_train, y_train, epochs=1)
    _, teacher_accuracy = teacher.evaluate(x_test, y_test, verbose=0)
    print(f"teacher test accuracy: {100 * teacher_accuracy:.2f}%")

    student = mlp()
    for index in (0, 2, 4):  # the Dense layers
        kernel, bias = teacher.get_layer(index=index).get_weights(teacher.ffmodel)
        student.get_layer(index=index).set_weights(student.ffmodel, kernel, bias)
    _, student_accuracy = student.evaluate(x_test, y_test, verbose=0)
    print(f"student test accuracy before training: {100 * student_accuracy:.2f}%")
    student.fit(x_train, y_train, epochs=args.epochs,
                callbacks=accuracy_checks(args, ModelAccuracy.MNIST_MLP))


if __name__ == "__main__":
    print("Sequential model, MNIST MLP net2net")
    top_level_task()
