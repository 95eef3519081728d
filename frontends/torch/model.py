"""`PyTorchModel`: FlexFlow's PyTorch front end, in both of its forms.

r22.07:

    PyTorchModel(model).torch_to_file("mlp.ff")           # plain Python, writes mlp.ff (+ .npz)
    outputs = PyTorchModel.file_to_ff("mlp.ff", ffmodel, [x])
    outputs = PyTorchModel(model).torch_to_ff(ffmodel, [x])   # in-process

r21.x:

    outputs = PyTorchModel("mlp.ff").apply(ffmodel, [x])    # or PyTorchModel(model=model)

Each returns the list of FlexFlow tensors the torch model returns. Beyond FlexFlow, the torch
model's weights come along: `torch_to_ff` gives its parameters and buffers to the layers as their
initial values (the values `ffmodel.compile()` creates the weights with), and `torch_to_file`
writes them to `<file>.npz`, which `file_to_ff` uses the same way when it is present (see
weights.py). Without it, FlexFlow initialises the weights, as FlexFlow always did.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import ir
from .builder import Builder
from .export import to_ir
from .weights import TorchState, npz_path


class PyTorchModel:
    def __init__(self, model=None, is_hf_model: bool = False, input_names=None,
                 batch_size: int = 1, seq_length=None, *, filename=None):
        """`model` is a torch.nn.Module, or (r21.x) the name of a `.ff` file to import."""
        if isinstance(model, (str, os.PathLike)):
            model, filename = None, model
        if is_hf_model:
            raise NotImplementedError("HuggingFace models (is_hf_model=True) need "
                                      "transformers.utils.fx tracing, which is not supported")
        if model is None and filename is None:
            raise ValueError("PyTorchModel needs a torch.nn.Module or a .ff filename")
        self.model = model
        self.filename = filename
        self.input_names = input_names
        self.batch_size = batch_size
        self.seq_length = seq_length

    def _require_model(self, what: str):
        if self.model is None:
            raise ValueError(f"{what}() needs a torch model; this PyTorchModel reads "
                             f"{self.filename} (use apply or file_to_ff)")
        return self.model

    # ---- export ---------------------------------------------------------------------------------
    def torch_to_string(self) -> list[str]:
        """The model's `.ff` lines (v2 format), without newlines."""
        nodes, _ = to_ir(self._require_model("torch_to_string"))
        return [ir.format_node(node) for node in nodes]

    def torch_to_file(self, filename, weights: bool = True) -> None:
        """Write the `.ff` file and, with `weights`, the model's weights to `<filename>.npz`."""
        nodes, state = to_ir(self._require_model("torch_to_file"))
        Path(filename).write_text("".join(ir.format_node(node) + "\n" for node in nodes))
        if weights:
            state.save(npz_path(filename))

    # ---- import ---------------------------------------------------------------------------------
    def torch_to_ff(self, ffmodel, input_tensors, verbose: bool = False) -> list:
        """Build the torch model into `ffmodel` (with its weights); returns its outputs."""
        nodes, state = to_ir(self._require_model("torch_to_ff"))
        return Builder(ffmodel, state, verbose).build(nodes, input_tensors)

    @staticmethod
    def file_to_ff(filename, ffmodel, input_tensors, verbose: bool = False) -> list:
        """Build a `.ff` file (v0, v1 or v2) into `ffmodel`; its `.npz` weights are loaded when
        the file has one."""
        nodes = ir.read_file(filename)
        weights = npz_path(filename)
        state = TorchState.load(weights) if weights.is_file() else None
        return Builder(ffmodel, state, verbose, source=str(filename)).build(nodes, input_tensors)

    def apply(self, ffmodel, input_tensors) -> list:
        """r21.x: build the file or the model this PyTorchModel was made with."""
        if self.filename is not None:
            return self.file_to_ff(self.filename, ffmodel, input_tensors)
        return self.torch_to_ff(ffmodel, input_tensors)


file_to_ff = PyTorchModel.file_to_ff
