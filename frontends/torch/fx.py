"""r20.12-r21.09 export API: `torch_to_flexflow(model, filename)` and `torch_to_flexflow_str`.

Both write the current (v2) format, which every importer here reads.
"""

from __future__ import annotations

from .model import PyTorchModel


def torch_to_flexflow(model, filename) -> None:
    """Write `model` to the `.ff` file `filename` (and its weights to `<filename>.npz`)."""
    PyTorchModel(model).torch_to_file(filename)


def torch_to_flexflow_str(model) -> list[str]:
    """The `.ff` lines of `model`, without newlines."""
    return PyTorchModel(model).torch_to_string()
