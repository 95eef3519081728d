"""Which ONNX operators the importer maps onto FFModel, and which attribute values it accepts.

Handler modules register with `@handles("Relu", ...)`, optionally declaring `limits`: attribute
name -> (test of the value, what is supported). `check_node` applies the limits before any layer
is built, so an unsupported attribute value fails with the node, the attribute and the supported
values named, instead of producing wrong numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .node import Node

Limit = tuple[Callable[[Any], bool], str]


@dataclass(frozen=True)
class Rule:
    handler: Callable
    limits: dict[str, Limit] = field(default_factory=dict)


HANDLERS: dict[str, Rule] = {}


def handles(*op_types: str, limits: dict[str, Limit] | None = None):
    def register(handler):
        for op_type in op_types:
            HANDLERS[op_type] = Rule(handler, dict(limits or {}))
        return handler
    return register


def supported_ops() -> list[str]:
    return sorted(HANDLERS)


def unsupported(node: Node) -> str | None:
    """Why the node's operator or an attribute value is unsupported, or None."""
    rule = HANDLERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
    if rule is None:
        op = f"{node.domain}.{node.op_type}" if node.domain else node.op_type
        return f"operator {op} is not supported"
    for name, (accepts, supported) in rule.limits.items():
        if name in node.attrs and not accepts(node.attrs[name]):
            return f"attribute {name}={node.attrs[name]!r} is not supported (supported: {supported})"
    return None


def supported_list() -> str:
    return (f"Supported operators: {', '.join(supported_ops())}; also Constant, and any "
            f"operator whose inputs are all constants (evaluated at import)")


def check_node(node: Node) -> Rule:
    """The node's rule; an ONNXImportError if its operator or an attribute value is unsupported."""
    reason = unsupported(node)
    if reason is not None:
        raise node.error(f"{reason}. {supported_list()}")
    return HANDLERS[node.op_type]


# ---- common limits ------------------------------------------------------------------------------
def one_of(*allowed):
    return (lambda value: value in allowed), " or ".join(repr(a) for a in allowed)

AUTO_PAD: Limit = one_of("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")
