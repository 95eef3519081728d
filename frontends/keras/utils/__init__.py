"""Keras utilities: `to_categorical`, `normalize`, `data_utils.get_file`, `progbar.Progbar`."""

from . import data_utils
from .data_utils import get_file
from .np_utils import normalize, to_categorical
from .progbar import Progbar

__all__ = ["to_categorical", "normalize", "get_file", "Progbar", "data_utils"]
