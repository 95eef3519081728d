"""`PyTorchModel`: FlexFlow's PyTorch front end, in both of its forms.

r22.07:

    PyTorchModel(model).torch_to_file("mlp.ff")           # plain Python, writes mlp.ff (+ .npz)
    outputs = PyTorchModel.file_to_ff("mlp.ff", ffmodel, [x])
    outputs = PyTorchModel(model).torch_to_ff(ffmodel, [x])   # in-process

r21.x:

    outputs = PyTorchModel("mlp.ff").apply(ffmodel, [x])    # or PyTorchModel(model=model)

Each returns the list of FlexFlow tensors the torch model returns. A model torch.fx cannot
trace is exported with torch.export on example inputs (export.py): zeros shaped as the input
tensors in-process; for a file, `example_inputs=`, or for a Hugging Face model
(`is_hf_model=True`, exported at once) `input_names` (default `["input_ids"]`) each of
`(batch_size, seq_length)` int64. Beyond FlexFlow, the torch
model's weights come along: `torch_to_ff` gives its parameters and buffers to the layers as their
initial values (the values `ffmodel.compile()` creates the weights with), and `torch_to_file`
writes them to `<file>.npz`, which `file_to_ff` uses the same way when it is present (see
weights.py). Without it, FlexFlow initialises the weights, as FlexFlow always did.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from . import ir
from .builder import Builder
from .export import examples, to_ir
from .weights import TorchState, npz_path


class PyTorchModel:
    def __init__(self, model=None, is_hf_model: bool = False, input_names=None,
                 batch_size: int = 1, seq_length=None, *, filename=None, example_inputs=None):
        """`model` is a torch.nn.Module, or (r21.x) the name of a `.ff` file to import.
        `example_inputs` (a tuple of tensors, or a dict of keyword tensors) are what
        torch.export traces on when torch.fx cannot trace the model and no input tensors give
        the shapes (torch_to_file, torch_to_string)."""
        if isinstance(model, (str, os.PathLike)):
            model, filename = None, model
        if model is None and filename is None:
            raise ValueError("PyTorchModel needs a torch.nn.Module or a .ff filename")
        self.model = model
        self.filename = filename
        self.input_names = input_names
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.is_hf_model = is_hf_model
        self.example_inputs = example_inputs

    def _require_model(self, what: str):
        if self.model is None:
            raise ValueError(f"{what}() needs a torch model; this PyTorchModel reads "
                             f"{self.filename} (use apply or file_to_ff)")
        return self.model

    def _ir(self, what: str, input_tensors=None):
        """IR and weights of the model; torch.export's examples from `input_tensors` if given."""
        model = self._require_model(what)
        names = (self.input_names or ["input_ids"]) if self.is_hf_model else None
        if input_tensors is not None:
            example = examples(input_tensors, names)
        elif self.example_inputs is not None or not self.is_hf_model:
            example = self.example_inputs
        else:
            if not isinstance(self.seq_length, int):
                raise ValueError(f"{what}() of a Hugging Face model needs seq_length (an int) and "
                                 f"batch_size: torch.export traces it for fixed shapes")
            shape = (self.batch_size, self.seq_length)
            example = {name: torch.zeros(shape, dtype=torch.int64) for name in names}
        return to_ir(model, example, export_first=self.is_hf_model)

    # ---- export ---------------------------------------------------------------------------------
    def torch_to_string(self) -> list[str]:
        """The model's `.ff` lines (v2 format), without newlines."""
        nodes, _ = self._ir("torch_to_string")
        return [ir.format_node(node) for node in nodes]

    def torch_to_file(self, filename, weights: bool = True) -> None:
        """Write the `.ff` file and, with `weights`, the model's weights to `<filename>.npz`."""
        nodes, state = self._ir("torch_to_file")
        Path(filename).write_text("".join(ir.format_node(node) + "\n" for node in nodes))
        if weights:
            state.save(npz_path(filename))

    # ---- import ---------------------------------------------------------------------------------
    def torch_to_ff(self, ffmodel, input_tensors, verbose: bool = False) -> list:
        """Build the torch model into `ffmodel` (with its weights); returns its outputs."""
        nodes, state = self._ir("torch_to_ff", input_tensors)
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
