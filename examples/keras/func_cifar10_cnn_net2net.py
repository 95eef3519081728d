"""Net2WiderNet: a student twice as wide in its first layer computes the teacher's function.
The teacher's first convolution becomes two identical convolutions whose outputs are
concatenated (64 channels), and the next convolution reads each copy with half the teacher's
kernel (np.concatenate of the halves along the input channels), so the student starts at the
teacher's accuracy and trains on from there."""

import numpy as np

from flexflow.keras.layers import Concatenate, Conv2D, Flatten, Input, MaxPooling2D
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD

from accuracy import ModelAccuracy, accuracy_checks
from example_data import cifar10_data, script_args
from example_models import apply, cifar_cnn_head


def conv(filters):
    return Conv2D(filters, kernel_size=(3, 3), padding="same", activation="relu")


def network(first_convs: int, image_shape: tuple):
    """(compiled model, its first convolutions, its other layers with weights in order)."""
    inputs = Input(shape=image_shape)
    firsts = [conv(32) for _ in range(first_convs)]
    outs = [layer(inputs) for layer in firsts]
    t = outs[0] if len(outs) == 1 else Concatenate(axis=1)(outs)
    rest = [conv(32), conv(64)] + cifar_cnn_head()
    t = apply([rest[0], MaxPooling2D(pool_size=(2, 2)), rest[1], MaxPooling2D(pool_size=(2, 2)),
               Flatten()] + rest[2:], t)
    model = Model(inputs, t)
    model.compile(optimizer=SGD(learning_rate=0.02), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model, firsts, rest


def top_level_task():
    args = script_args(epochs=160, image_size=32)
    (x_train, y_train), (x_test, y_test) = cifar10_data(args.num_samples or 10000,
                                                        args.image_size)
    teacher, (teacher_first,), teacher_rest = network(1, x_train.shape[1:])
    teacher.fit(x_train, y_train, epochs=min(10, args.epochs))
    _, teacher_accuracy = teacher.evaluate(x_test, y_test, verbose=0)
    print(f"teacher test accuracy: {100 * teacher_accuracy:.2f}%")

    student, student_firsts, student_rest = network(2, x_train.shape[1:])
    for layer in student_firsts:
        layer.set_weights(student.ffmodel, teacher_first.get_weights(teacher.ffmodel))
    kernel, bias = teacher_rest[0].get_weights(teacher.ffmodel)
    student_rest[0].set_weights(student.ffmodel,
                                np.concatenate([kernel / 2, kernel / 2], axis=1), bias)
    for source, target in zip(teacher_rest[1:], student_rest[1:]):
        target.set_weights(student.ffmodel, source.get_weights(teacher.ffmodel))
    _, student_accuracy = student.evaluate(x_test, y_test, verbose=0)
    print(f"student test accuracy before training: {100 * student_accuracy:.2f}%")
    student.fit(x_train, y_train, epochs=args.epochs,
                callbacks=accuracy_checks(args, ModelAccuracy.CIFAR10_CNN))


if __name__ == "__main__":
    print("Functional API, CIFAR-10 CNN net2net (wider first layer)")
    top_level_task()
