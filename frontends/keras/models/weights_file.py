"""The weights file of `save_weights` / `load_weights`.

Format: a NumPy `.npz` archive (a zip of `.npy` files) holding only numeric and string arrays,
readable with `np.load(path, allow_pickle=False)`:

* `__format__`: a 0-d string array, `flexflow.keras.weights/1`;
* `__layers__`: a 1-d string array, the names of the layers with weights, in model order;
* `<layer name>/<weight name>`: one float32 array per weight, in FlexFlow's layouts (Dense
  `kernel` (out, in) and `bias`; Conv2D `kernel` (out, in/groups, kh, kw) and `bias`; Embedding
  `weight`; BatchNormalization `scale`, `bias`, `running_mean`, `running_var`).

Loading matches layers by position among the layers with weights (Keras's default), or by name
with `by_name=True`. A path without the `.npz` suffix gets it appended, on save and on load.
Reading and writing go through `flexflow.archive` (atomic writes; each array's declared shape is
checked before its data is read).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flexflow.archive import Archive, write

MAX_NAME_CHARS = 1 << 20  # of the __format__ and __layers__ entries together

FORMAT = "flexflow.keras.weights/1"
FORMAT_KEY, LAYERS_KEY = "__format__", "__layers__"

# One layer's weights: (layer name, [(weight name, array or shape), ...])
LayerWeights = tuple[str, list[tuple[str, object]]]


def npz_path(path) -> Path:
    path = Path(path)
    if path.suffix in (".h5", ".hdf5", ".keras"):
        raise ValueError(f"{path}: HDF5/.keras weight files are not supported; use a .npz path")
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def save(path, layers: list[LayerWeights]) -> Path:
    """Write the weights atomically (a partly written file never replaces a good one)."""
    names = [name for name, _ in layers]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"layers with weights need unique names to be saved; repeated: "
                         f"{repeated}")
    arrays = {f"{name}/{weight}": np.asarray(array, np.float32)
              for name, weights in layers for weight, array in weights}
    return write(npz_path(path), {FORMAT_KEY: np.array(FORMAT),
                                  LAYERS_KEY: np.array(names, dtype=str), **arrays})


def load(path, model_layers: list[LayerWeights], by_name: bool = False) -> list[list]:
    """For each layer of `model_layers` (weights given as shapes), its arrays from the file."""
    path = npz_path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no weights file at {path}")
    with Archive(path, ValueError, "weights file") as archive:
        if (FORMAT_KEY not in archive.names or LAYERS_KEY not in archive.names
                or str(archive.text(FORMAT_KEY, MAX_NAME_CHARS)) != FORMAT):
            raise ValueError(f"{path} is not a weights file written by save_weights (no "
                             f"{FORMAT_KEY} = {FORMAT!r} entry)")
        file_layers = [str(n) for n in np.atleast_1d(archive.text(LAYERS_KEY, MAX_NAME_CHARS))]
        sources = _match(path, file_layers, [name for name, _ in model_layers], by_name)
        result = []
        for source, (name, weights) in zip(sources, model_layers):
            arrays = []
            for weight, shape in weights:
                key = f"{source}/{weight}"
                if key not in archive.names:
                    raise ValueError(f"{path} has no weight {key!r} for layer '{name}'")
                declared, dtype = archive.header(key)
                if declared != tuple(shape):
                    raise ValueError(f"{path}: weight {key!r} has shape {declared}, layer "
                                     f"'{name}' expects {tuple(shape)}")
                if dtype.kind not in "fiu":
                    raise ValueError(f"{path}: weight {key!r} is {dtype}, not numbers")
                arrays.append(archive.array(key, declared, dtype, f"weight {key!r}"))
            result.append(arrays)
    return result


def _match(path, file_layers: list[str], model_layers: list[str], by_name: bool) -> list[str]:
    """The file's layer name to read for each model layer."""
    if by_name:
        missing = [name for name in model_layers if name not in file_layers]
        if missing:
            raise ValueError(f"{path} has no weights for layer(s) {missing} (it holds "
                             f"{file_layers})")
        return model_layers
    if len(file_layers) != len(model_layers):
        raise ValueError(f"{path} holds weights of {len(file_layers)} layers, the model has "
                         f"{len(model_layers)} layers with weights")
    return file_layers
