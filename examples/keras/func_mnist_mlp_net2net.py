"""Weight transfer between functional models, through the layer objects kept at construction:
the student (same shape) starts at the teacher's accuracy and trains on."""

from flexflow.keras.layers import Dense, Input
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import mnist_data, script_args


def mlp():
    """The compiled model and its Dense layers."""
    layers = [Dense(512, activation="relu"), Dense(512, activation="relu"),
              Dense(10, activation="softmax")]
    inputs = Input(shape=(784,))
    t = inputs
    for layer in layers:
        t = layer(t)
    model = Model(inputs, t)
    model.compile(optimizer=SGD(learning_rate=0.05, momentum=0.9),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model, layers


def top_level_task():
    args = script_args(epochs=10)
    (x_train, y_train), (x_test, y_test) = mnist_data((784,), args.num_samples)
    teacher, teacher_layers = mlp()
    teacher.fit(x_train, y_train, epochs=1)
    _, teacher_accuracy = teacher.evaluate(x_test, y_test, verbose=0)
    print(f"teacher test accuracy: {100 * teacher_accuracy:.2f}%")

    student, student_layers = mlp()
    for source, target in zip(teacher_layers, student_layers):
        target.set_weights(student.ffmodel, source.get_weights(teacher.ffmodel))
    _, student_accuracy = student.evaluate(x_test, y_test, verbose=0)
    print(f"student test accuracy before training: {100 * student_accuracy:.2f}%")
    student.fit(x_train, y_train, epochs=args.epochs,
                callbacks=accuracy_checks(args, ModelAccuracy.MNIST_MLP))


if __name__ == "__main__":
    print("Functional API, MNIST MLP net2net")
    top_level_task()
