"""`Node`: one ONNX node as the handlers see it, with its attributes decoded and errors that
name it."""

from __future__ import annotations

from typing import Any

from onnx import NodeProto, helper

from .errors import ONNXImportError


class Node:
    def __init__(self, proto: NodeProto, opset: int, source: str, wanted: set[str]):
        self.proto = proto
        self.op_type = proto.op_type
        self.domain = proto.domain
        self.name = proto.name or (proto.output[0] if proto.output else proto.op_type)
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.opset = opset
        self.source = source
        self._wanted = wanted
        self.attrs = {a.name: _decode(helper.get_attribute_value(a)) for a in proto.attribute}

    def __str__(self) -> str:
        return f"node '{self.name}' ({self.op_type})"

    def error(self, message: str) -> ONNXImportError:
        return ONNXImportError(f"{self.source}: {self}: {message}")

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def ints(self, name: str, default=None) -> tuple[int, ...] | None:
        value = self.attrs.get(name)
        return default if value is None else tuple(int(v) for v in value)

    def wanted(self, index: int) -> bool:
        """Whether output `index` exists and something (a node or the graph output) reads it."""
        return index < len(self.outputs) and self.outputs[index] in self._wanted


def _decode(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", "replace") for v in value]
    return value
