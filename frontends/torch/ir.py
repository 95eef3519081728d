"""The `.ff` intermediate representation: one node per torch.fx node, and its text formats.

A node has a name (the FX node name, which becomes the FlexFlow layer name), the names of the nodes
it reads (`inputs`, in argument order, repeats kept) and of the nodes that read it (`outputs`), an
`OpType` and a list of parameters. Parameters are Python literals (int, float, bool, None, str,
tuples, lists, slices, Ellipsis) or a `Ref` to another node whose *value* is used (a size computed
in the graph, as in `x.view(x.size(0), -1)`).

Formats (one line per node, in topological order):

* v2 (FlexFlow r22.07+, written here): `name; in1,in2,; out1,; OPTYPE_NAME; param; ...`. A
  parameter ending in `,` is a `Ref`. A `get_attr` node is `name; ATTRIBUTE`.
* v1 (r21.03-r21.09, read): `name, in1:in2:, out1:, OPTYPE_NAME, param, ...`.
* v0 (r20.12, read): `name, in1:in2:, <OpType value>, param, ...` (no consumer list; CONV2D has
  no groups field).

Op types are FlexFlow's `OpType` names, and for torch constructs FlexFlow's importer had no op for
(SiLU, Hardtanh, chunk, GroupNorm, scaled dot-product attention, LSTM, the comparisons, `where`
and logical ops of masks, clamp, gelu's tanh approximation) the names of `TorchOp`,
which the builder composes from FFModel layers (one node, one line, as for FlexFlow's own ops).

Parameters are read with `ast.literal_eval`, which accepts literals only: a file can never run
code. A file that cannot be read or parsed raises `ConversionError` naming the file and line; so
does every later problem with it (builder.py, weights.py), naming the node as well.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from flexflow.type import OpType

IR_DELIMITER = "; "
INOUT_DELIMITER = ","
V1_EDGE_DELIMITER = ":"
_SLICE = re.compile(r"^slice\((.*)\)$")
MAX_LISTED = 20  # problems listed one by one in an error about several nodes
ONNX_ROUTE = ("A model that torch.onnx.export can export may import through flexflow.onnx "
              "instead (ONNXModel(file).apply(ffmodel, inputs)), which translates ONNX operators "
              "rather than torch calls.")


class ConversionError(ValueError):
    """A torch model or a `.ff` file uses something the PyTorch front end cannot translate; the
    message names the node, what it calls and where it comes from."""


def all_errors(errors: list[ConversionError], source: str, noun: str = "node",
               hint: str = "") -> ConversionError:
    """One error for every node (or line) of `source` that cannot be translated, so that a
    model's whole list of problems is known at once: each one's own message on a line of its
    own (the first MAX_LISTED of them), then `hint`. A single error without a hint is returned
    as it is."""
    if len(errors) == 1 and not hint:
        return errors[0]
    count = f"{len(errors)} {noun}{'s' if len(errors) > 1 else ''}"
    lines = [f"{source}: {count} cannot be translated:"]
    lines += [f"  {error}" for error in errors[:MAX_LISTED]]
    if len(errors) > MAX_LISTED:
        lines.append(f"  ... and {len(errors) - MAX_LISTED} more")
    return ConversionError("\n".join(lines + ([hint] if hint else [])))


class TorchOp(Enum):
    """Op types beyond FlexFlow's `OpType`: torch constructs that no FlexFlow op type names, each
    composed by the builder from FFModel layers it has. Their values lie apart from OpType's, so
    a v0 file (integer op types) can hold them too."""

    SILU = 3001                          # x * sigmoid(x)
    HARDTANH = 3002                      # ; min; max (ReLU6: 0.0; 6.0)
    CHUNK = 3003                         # ; chunks; dim
    GROUP_NORM = 3004                    # ; groups; channels; eps; affine (inputs x[, w, b])
    SCALED_DOT_PRODUCT_ATTENTION = 3005  # ; dropout_p; is_causal; scale (inputs q, k, v[, mask])
    LSTM = 3006                          # ; input; hidden; layers; bias; batch_first; dropout
    # (inputs x[, h0, c0]); the parameters' meanings and types are those of the torch module or
    # function they come from, listed in composed.py, which builds them
    COMPARE = 3007     # ; op[; number] (op eq, ne, lt, le, gt, ge; inputs x[, y]): a bool tensor
    WHERE = 3008       # ; a; b (numbers, or None for a tensor input; inputs cond, tensor choices)
    LOGICAL = 3009     # ; op (and, or: inputs x, y; not: input x; bool tensors)
    CLAMP = 3010       # ; min; max (numbers, either None)
    GELU_TANH = 3011   # gelu(approximate="tanh"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    # the first four are listed in logic.py, which builds them; a cast is OpType's TO; torch.bool


@dataclass(frozen=True)
class Ref:
    """A parameter that stands for the value of another node."""

    name: str


@dataclass
class IRNode:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    op_type: OpType | TorchOp
    params: tuple = ()
    where: str = field(default="", compare=False)  # source line or file line, for errors

    def error(self, what: str) -> ConversionError:
        """An error about this node, naming it, its op and where it comes from."""
        where = f" ({self.where})" if self.where else ""
        return ConversionError(f"node '{self.name}' ({self.op_type.name}){where}: {what}")

    def dim(self, dim: int, rank: int) -> int:
        """`dim` of a tensor of `rank` as a non-negative index (torch counts from the end when it
        is negative); an error naming this node when it is out of range."""
        if not -rank <= dim < rank:
            raise self.error(f"dim {dim} is out of range for a tensor of rank {rank}")
        return dim % rank


# ---- parameters ---------------------------------------------------------------------------------
def format_param(value) -> str:
    """Text of one parameter; `str()` of the value, as FlexFlow's exporter writes them."""
    if isinstance(value, Ref):
        return value.name + INOUT_DELIMITER
    if value is Ellipsis:
        return "..."
    return str(value)


def parse_param(text: str):
    """The value of one parameter's text: a literal, a slice, a `Ref` or else the bare string."""
    text = text.strip()
    if text.endswith(INOUT_DELIMITER):
        return Ref(text[:-1])
    match = _SLICE.match(text)
    if match and match.group(1).count(",") <= 2:  # start, stop, step: literals
        return slice(*(_literal(part.strip()) for part in match.group(1).split(",")))
    return _literal(text)


def _literal(text: str):
    if text in ("inf", "-inf", "nan"):
        return float(text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):  # the last two: the parser's
        return text                                                # answers to deep nesting


# ---- lines --------------------------------------------------------------------------------------
def format_node(node: IRNode) -> str:
    """The node's v2 line (without the newline)."""
    if node.op_type == OpType.ATTRIBUTE:
        return IR_DELIMITER.join([node.name, OpType.ATTRIBUTE.name])
    fields = [node.name, "".join(n + INOUT_DELIMITER for n in node.inputs),
              "".join(n + INOUT_DELIMITER for n in node.outputs), node.op_type.name]
    fields += [format_param(p) for p in node.params]
    return IR_DELIMITER.join(fields)


def _names(text: str, delimiter: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(delimiter) if name.strip())


def _op_type(text: str, where: str) -> OpType | TorchOp:
    text = text.strip()
    for kind in (OpType, TorchOp):
        try:
            return kind(int(text)) if text.lstrip("-").isdigit() else kind[text]
        except (KeyError, ValueError):
            pass
    raise ConversionError(f"{where}: unknown op type {text!r}")


def _edge_node(fields: list[str], delimiter: str, form: str, line: str, where: str) -> IRNode:
    """The node of a line in a format with an outputs field: `form` is that format's line."""
    if len(fields) < 4:
        raise ConversionError(f"{where}: expected '{form}', got {line!r}")
    name, inputs, outputs, op = fields[:4]
    params = tuple(parse_param(p) for p in fields[4:])
    return IRNode(name, _names(inputs, delimiter), _names(outputs, delimiter),
                  _op_type(op, where), params, where)


def _parse_v2(line: str, where: str) -> IRNode:
    fields = [f.strip() for f in line.split(";")]
    if len(fields) == 2 and fields[1] == OpType.ATTRIBUTE.name:
        return IRNode(fields[0], (), (), OpType.ATTRIBUTE, (), where)
    return _edge_node(fields, INOUT_DELIMITER, "name; inputs; outputs; OPTYPE[; params]", line,
                      where)


def _parse_v1(line: str, where: str) -> IRNode:
    return _edge_node(_split_top_level(line), V1_EDGE_DELIMITER,
                      "name, inputs, outputs, OPTYPE[, params]", line, where)


def _parse_v0(line: str, where: str) -> IRNode:
    fields = _split_top_level(line)
    if len(fields) < 3:
        raise ConversionError(f"{where}: expected 'name, inputs, OPTYPE[, params]', got "
                              f"{line!r}")
    name, inputs, op = fields[:3]
    op_type = _op_type(op, where)
    params = tuple(parse_param(p) for p in fields[3:])
    if op_type == OpType.CONV2D and len(params) == 9:  # no groups field before the bias flag
        params = params[:8] + (1,) + params[8:]
    return IRNode(name, _names(inputs, V1_EDGE_DELIMITER), (), op_type, params, where)


def _split_top_level(line: str) -> list[str]:
    """Split on commas outside brackets, so that a tuple parameter stays one field."""
    fields, depth, start = [], 0, 0
    for i, char in enumerate(line):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            fields.append(line[start:i].strip())
            start = i + 1
    fields.append(line[start:].strip())
    return fields


def format_version(lines: list[str]) -> int:
    """0, 1 or 2, from the first line: v2 uses `;`, v0 writes the op type as an integer."""
    first = lines[0]
    if ";" in first:
        return 2
    fields = _split_top_level(first)
    return 0 if len(fields) >= 3 and fields[2].strip().lstrip("-").isdigit() else 1


def parse_lines(lines: list[str], source: str) -> list[IRNode]:
    """IR nodes of a `.ff` text in any of the three formats; `source` names it in errors."""
    numbered = [(i + 1, line.rstrip("\n")) for i, line in enumerate(lines) if line.strip()]
    if not numbered:
        raise ConversionError(f"{source}: no nodes (empty file)")
    parse = {0: _parse_v0, 1: _parse_v1, 2: _parse_v2}[format_version([numbered[0][1]])]
    nodes, errors = [], []
    for number, line in numbered:  # every line's problem in one error
        try:
            nodes.append(parse(line, f"{source} line {number}"))
        except ConversionError as error:
            errors.append(error)
    if errors:
        raise all_errors(errors, source, "line")
    seen = set()
    for node in nodes:
        if node.name in seen:
            raise node.error("the name is used by an earlier node")
        seen.add(node.name)
    return nodes


def read_file(filename) -> list[IRNode]:
    path = Path(filename)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConversionError(f"cannot read the .ff file {path}: {error}") from None
    return parse_lines(text.splitlines(), str(path))
