"""The weights file of `save_weights` / `load_weights`.

Format: a NumPy `.npz` archive (a zip of `.npy` files) holding only numeric arrays, readable with
`np.load(path, allow_pickle=False)`:

* `__format__`: a 0-d string array, `flexflow.keras.weights/1`;
* `<layer name>/<weight name>`: one float32 array per weight, in FlexFlow's layouts (Dense kernel
  (out, in), Conv2D kernel (out, in/groups, kh, kw), BatchNormalization scale, bias, running_mean,
  running_var, ...).

Weights are matched by layer name, so the names of layers with weights must be unique in the
model. A path without the `.npz` suffix gets it appended (as `np.savez` does) on save and load.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

FORMAT = "flexflow.keras.weights/1"
FORMAT_KEY = "__format__"


def npz_path(path) -> Path:
    path = Path(path)
    if path.suffix in (".h5", ".hdf5", ".keras"):
        raise ValueError(f"{path}: HDF5/.keras weight files are not supported; use a .npz path")
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def save(path, weights: dict[str, np.ndarray]) -> Path:
    """Write `weights` (key -> array) atomically: a partly written file never replaces a good
    one."""
    path = npz_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as f:
        np.savez(f, **{FORMAT_KEY: np.array(FORMAT)}, **weights)
    os.replace(partial, path)
    return path


def load(path, expected: dict[str, tuple]) -> dict[str, np.ndarray]:
    """The arrays of the file at `path`, checked against `expected` (key -> shape)."""
    path = npz_path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no weights file at {path}")
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise ValueError(f"{path} is not a weights file written by save_weights ({error})") from None
    with archive:
        keys = set(archive.files)
        if FORMAT_KEY not in keys or str(archive[FORMAT_KEY]) != FORMAT:
            raise ValueError(f"{path} is not a weights file written by save_weights (no "
                             f"{FORMAT_KEY} = {FORMAT!r} entry)")
        keys.discard(FORMAT_KEY)
        missing, extra = sorted(set(expected) - keys), sorted(keys - set(expected))
        if missing or extra:
            raise ValueError(f"{path} does not match the model: missing weights {missing}, "
                             f"unknown weights {extra}")
        arrays = {key: archive[key] for key in expected}
    for key, shape in expected.items():
        if arrays[key].shape != tuple(shape):
            raise ValueError(f"{path}: weight {key!r} has shape {arrays[key].shape}, the model "
                             f"expects {tuple(shape)}")
    return arrays
