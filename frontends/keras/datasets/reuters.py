"""Reuters newswire topics (46 classes), Keras 2's loader:
`load_data(path='reuters.npz', num_words=None, skip_top=0, maxlen=None, test_split=0.2,
seed=113, start_char=1, oov_char=2, index_from=3)` -> (x_train, y_train), (x_test, y_test):
x object arrays of lists of word ids, y int64 arrays.

The published reuters.npz stores `x` as an object array (pickled lists); it is read with the
restricted unpickler of `safe_pickle` (never `allow_pickle=True`). Word ids in the file are
shifted by `index_from`; each sequence starts with `start_char`; ids outside
[skip_top, num_words) become `oov_char` (or are dropped when it is None); sequences of `maxlen`
ids or more are dropped; samples are shuffled with `seed` before the split.
"""

from __future__ import annotations

import json

import numpy as np

from . import files
from .npz_objects import load_npz

ORIGIN = "https://s3.amazonaws.com/text-datasets/reuters.npz"
WORD_INDEX_ORIGIN = "https://s3.amazonaws.com/text-datasets/reuters_word_index.json"


def load_data(path="reuters.npz", num_words=None, skip_top=0, maxlen=None, test_split=0.2,
              seed=113, start_char=1, oov_char=2, index_from=3, **kwargs):
    num_words = kwargs.pop("nb_words", num_words)  # Keras 1 name
    if kwargs:
        raise TypeError(f"reuters.load_data got unexpected arguments {sorted(kwargs)}")
    arrays = load_npz(files.locate("reuters", path, ORIGIN if path == "reuters.npz" else None))
    if "x" not in arrays or "y" not in arrays or len(arrays["x"]) != len(arrays["y"]):
        raise files.DatasetError(f"{path}: expected arrays 'x' and 'y' of equal length")
    xs, labels = arrays["x"], np.asarray(arrays["y"], np.int64)
    order = np.arange(len(xs))
    np.random.RandomState(seed).shuffle(order)
    xs = [_word_ids(xs[i], path) for i in order]
    labels = labels[order]
    if start_char is not None:
        xs = [[start_char] + [w + index_from for w in x] for x in xs]
    elif index_from:
        xs = [[w + index_from for w in x] for x in xs]
    if maxlen:
        kept = [i for i, x in enumerate(xs) if len(x) < maxlen]
        xs, labels = [xs[i] for i in kept], labels[kept]
    if not num_words:
        num_words = max(max(x) for x in xs if x)
    if oov_char is not None:
        xs = [[w if skip_top <= w < num_words else oov_char for w in x] for x in xs]
    else:
        xs = [[w for w in x if skip_top <= w < num_words] for x in xs]
    cut = int(len(xs) * (1 - test_split))
    return ((_object_array(xs[:cut]), labels[:cut]), (_object_array(xs[cut:]), labels[cut:]))


def _word_ids(sequence, path) -> list[int]:
    ids = list(sequence)
    if not all(isinstance(w, (int, np.integer)) for w in ids):
        raise files.DatasetError(f"{path}: 'x' must hold sequences of integer word ids")
    return [int(w) for w in ids]


def _object_array(sequences: list) -> np.ndarray:
    out = np.empty(len(sequences), dtype=object)
    for i, sequence in enumerate(sequences):
        out[i] = sequence
    return out


def get_word_index(path="reuters_word_index.json") -> dict:
    """Word -> id (before the `index_from` shift), from the JSON file."""
    location = files.locate("reuters", path,
                            WORD_INDEX_ORIGIN if path == "reuters_word_index.json" else None)
    with open(location, encoding="utf-8") as f:
        return json.load(f)
