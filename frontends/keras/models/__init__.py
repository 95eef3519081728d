"""Keras models: Sequential and the functional Model, on top of FFModel."""

from .base_model import BaseModel
from .model import Model
from .sequential import Sequential
from ..tensor import Tensor

__all__ = ["BaseModel", "Model", "Sequential", "Tensor"]
