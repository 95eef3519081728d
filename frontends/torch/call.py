"""One traced call (an FX node) as the exporters see it: its arguments and how to fail on it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import torch
import torch.fx as fx

from .ir import ConversionError

_REQUIRED = object()
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in \S+\n\s*(?P<code>[^\n]*)')
_TORCH_DIR = os.path.dirname(torch.__file__)


def source_line(node: fx.Node) -> str:
    """`file:line: code` of the user's code that made `node`, when tracing recorded it."""
    for match in _FRAME.finditer(node.stack_trace or ""):
        if not match["file"].startswith(_TORCH_DIR):
            return f"{match['file']}:{match['line']}: {match['code'].strip()}"
    return ""


def describe_target(node: fx.Node, module=None) -> str:
    if node.op == "call_module":
        return f"{type(module).__name__} module '{node.target}'"
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "get_attr":
        return f"attribute '{node.target}'"
    name = getattr(node.target, "__name__", str(node.target))
    owner = getattr(node.target, "__module__", None) or "builtins"
    return f"{owner.lstrip('_')}.{name}"  # _operator.add -> operator.add


def meta(node: fx.Node):
    """The example value torch.export recorded for `node` (shapes, dtypes)."""
    return node.meta["val"]


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class Call:
    """The arguments of `node`, with `self` first for a method call (as for torch functions)."""

    node: fx.Node
    target: str      # what the node calls, in words
    where: str       # the user's source line, or ""

    @property
    def args(self) -> tuple:
        return self.node.args

    @property
    def kwargs(self) -> dict:
        return self.node.kwargs

    def arg(self, index: int, name: str, default=_REQUIRED):
        """Argument `name`, passed at position `index` or by keyword."""
        if index < len(self.args):
            return self.args[index]
        if name in self.kwargs:
            return self.kwargs[name]
        if default is _REQUIRED:
            raise self.fail(f"argument '{name}' is missing")
        return default

    def rest(self, start: int) -> tuple:
        """Positional arguments from `start` on, unpacking a single list or tuple (the two ways
        to pass a shape: `x.view(2, 3)` and `x.view((2, 3))`)."""
        rest = tuple(self.args[start:])
        if len(rest) == 1 and isinstance(rest[0], (tuple, list)):
            return tuple(rest[0])
        return rest

    def tensor(self, index: int, name: str) -> fx.Node:
        value = self.arg(index, name)
        if not isinstance(value, fx.Node):
            raise self.fail(f"argument '{name}' must be a tensor of the model, got {value!r}")
        return value

    def expect(self, condition: bool, what: str) -> None:
        if not condition:
            raise self.fail(what)

    def fail(self, what: str) -> ConversionError:
        where = f" at {self.where}" if self.where else ""
        return ConversionError(f"node '{self.node.name}' ({self.target}){where}: {what}")
