"""Keras layers (channels-first, as FlexFlow's). Each emits FFModel ops when its model compiles."""

from .activation import Activation
from .base_layer import Layer, Node
from .batch_normalization import BatchNormalization
from .conv2d import Conv2D
from .dense import Dense
from .dropout import Dropout
from .embedding import Embedding
from .flatten import Flatten
from .input_layer import Input, InputLayer
from .merge import (Add, Concatenate, Maximum, Minimum, Multiply, Subtract, add, concatenate,
                    maximum, minimum, multiply, subtract)
from .permute import Permute
from .pooling import AveragePooling2D, MaxPooling2D, Pooling2D
from .reshape import Reshape

__all__ = ["Layer", "Node", "InputLayer", "Input", "Dense", "Conv2D", "Pooling2D",
           "MaxPooling2D", "AveragePooling2D", "Flatten", "Activation", "Dropout", "Reshape",
           "Permute", "Embedding", "BatchNormalization", "Concatenate", "Add", "Subtract",
           "Multiply", "Maximum", "Minimum", "concatenate", "add", "subtract", "multiply",
           "maximum", "minimum"]
