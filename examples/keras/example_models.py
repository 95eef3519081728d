"""Layer stacks several Keras examples share (each call makes new layers)."""

from __future__ import annotations

from flexflow.keras import initializers
from flexflow.keras.layers import Conv2D, Dense, Dropout, Flatten, MaxPooling2D


def apply(layers: list, tensor):
    """The functional form of a stack: each layer applied to the previous output."""
    for layer in layers:
        tensor = layer(tensor)
    return tensor


def mnist_mlp_head(classes: int = 10) -> list:
    """Dense 512 - Dense 512 - Dense classes, ReLU and dropout between, softmax at the end."""
    return [Dense(512, activation="relu"), Dropout(0.2), Dense(512, activation="relu"),
            Dropout(0.2), Dense(classes, activation="softmax")]


def mnist_cnn_body() -> list:
    """A small, fast MNIST CNN front end: one strided 3x3 convolution, flattened. (FlexFlow's
    example uses two stride-1 convolutions of 32 and 64 channels: about 100x the CPU time.)"""
    return [Conv2D(16, kernel_size=(3, 3), strides=(2, 2), activation="relu"), Flatten()]


def cifar_cnn_body() -> list:
    """Two blocks of two padded 3x3 convolutions and a 2x2 max pool, flattened."""
    glorot = initializers.GlorotUniform
    return [Conv2D(32, kernel_size=(3, 3), padding=(1, 1), activation="relu",
                   kernel_initializer=glorot(123)),
            Conv2D(32, kernel_size=(3, 3), padding=(1, 1), activation="relu"),
            MaxPooling2D(pool_size=(2, 2), strides=(2, 2)),
            Conv2D(64, kernel_size=(3, 3), padding=(1, 1), activation="relu"),
            Conv2D(64, kernel_size=(3, 3), padding=(1, 1), activation="relu"),
            MaxPooling2D(pool_size=(2, 2), strides=(2, 2)), Flatten()]


def cifar_cnn_head() -> list:
    return [Dense(512, activation="relu"), Dense(10, activation="softmax")]
