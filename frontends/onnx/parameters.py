"""Which float initializers of an ONNX file are the model's parameters (they train) and which are
constants its exporter stored as initializers (they do not): attention scales, activation
constants, masks, position tables, buffers.

ONNX does not mark parameters, and exporters name them unreliably: torch names a module's
parameter after its state (`encoder.layer.0.output.dense.bias`), but a weight it transposed
for a MatMul `onnx::MatMul_39` or `val_37`, and a constant `val_7`. What tells them apart here,
in this order:

1. `ONNXModel(..., parameters=[...])` names the parameters outright;
2. an initializer that is not a float is a constant;
3. one read by a weight operand of an operator that owns weights (the kernel and bias of Gemm,
   Conv and a MatMul by a constant, a normalisation's scale and bias, the table of an embedding
   lookup), directly or through layout operators (transposes, reshapes, casts), is a parameter,
   except an instance or group normalisation's scale of ones and bias of zeros not named as a
   module's parameter: torch's exporters write GroupNorm as an InstanceNormalization over the
   grouped channels with such constants (the module's own scale and bias following as Mul and
   Add);
4. so is one applied to the output of such an operator (or a layout of it), or to the result
   of such an application: added (a bias the exporter wrote apart), or multiplied as a vector
   along one dim (a per-channel scale: a batch norm written out as Mul and Add);
5. so is one named as torch names a module's parameter (a dotted path ending in `.weight` or
   `.bias`, or `.weight_...`/`.bias_...` as an LSTM's `weight_ih_l0`: RMSNorm's scale, read by
   a Mul; an LSTM's weights, which the legacy exporter slices to reorder the gates);
6. anything else is a constant. Where it is a float tensor of more than one element with
   values a parameter could hold (not a mask's infinities or float extremes), the graph does
   not say which it is: a warning names such initializers and the keyword that makes them
   train.

A parameter of more than one dim whose values repeat one slice along some dims (and are not
all one value) is that slice broadcast (`broadcast_source`): torch's current exporter writes a
parameter gathered at constant indices as such a copy (BERT's token type embedding, one row
repeated over the batch and the sequence), and the slice, not each copy, is what trains.

An initializer read by several operators that own weights trains a copy in each of their
layers, which a warning says: right where the exporter stored equal parameters once (torch's
exporters do), wrong where the model ties them (an embedding shared with its output layer),
and the file does not say which. BatchNormalization's running statistics are statistics:
the layer updates them, gradients do not; an LSTM's initial states are constants.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable

import numpy as np

from .errors import ONNXImportError, ONNXImportWarning
from .loader import GraphInfo

# Operators that only move a value's elements: a parameter keeps being one through them.
LAYOUT_OPS = {"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Cast",
              "CastLike"}
# Operators that own weights: op type -> the input positions that are their weights.
WEIGHT_OPERANDS = {"Gemm": (1, 2), "Conv": (1, 2), "MatMul": (0, 1),
                   "BatchNormalization": (1, 2), "LayerNormalization": (1, 2),
                   "InstanceNormalization": (1, 2), "GroupNormalization": (1, 2),
                   "LSTM": (1, 2, 3)}
# running mean and variance; a recurrent layer's initial hidden and cell states
STATISTIC_OPERANDS = {"BatchNormalization": (3, 4), "LSTM": (5, 6)}
# torch's names of a module's parameters: `norm.weight`, `lstm.weight_ih_l0`, `rnn.bias_hh_l1`
PARAMETER_NAME = re.compile(r"\.(weight|bias)(_\w+)?$")
MASK_MAGNITUDE = 1e30  # beyond any trained weight: the "minus infinity" of a mask
LISTED = 8  # initializers a warning names before it counts the rest


def parameter_names(info: GraphInfo, named: Iterable[str] | None = None) -> frozenset[str]:
    """The names of the initializers of `info` that are parameters, as the module docstring
    decides, warning where the graph does not tell; `named` gives them outright."""
    floats = {name for name, array in info.initializers.items() if array.dtype.kind == "f"}
    if named is not None:
        return _checked(info, named, floats)
    origin = _origins(info)
    owners: dict[str, list[str]] = {}
    for node in info.nodes:
        for name in _weight_operands(node, origin):
            owners.setdefault(origin[name], []).append(node.name or node.output[0])
    parameters = set(owners) & floats - _unit_affine(info, origin)
    parameters |= _affine(info, origin) & floats
    parameters |= {name for name in floats if PARAMETER_NAME.search(name)}
    _warn_undecided(info, floats - parameters - _statistics(info, origin)
                    - _unit_affine(info, origin))
    shared = {name: readers for name, readers in owners.items() if len(readers) > 1}
    _warn_tied(info, shared, _copies(info, parameters))
    return frozenset(parameters)


def _checked(info: GraphInfo, named: Iterable[str], floats: set[str]) -> frozenset[str]:
    names = [named] if isinstance(named, str) else list(named)
    wrong = [name for name in names if name not in floats]
    if wrong:
        raise ONNXImportError(f"{info.source}: parameters= names {wrong}, which are not float "
                              f"initializers of the graph")
    return frozenset(names)


def _origins(info: GraphInfo) -> dict[str, str]:
    """Value name -> the initializer it is, for initializers and what layout operators make
    of one (with only constant other inputs: a Reshape's shape)."""
    origin = {name: name for name in info.initializers}
    for node in info.nodes:
        sources = [origin[name] for name in node.input[:1] if name in origin]
        if node.op_type in LAYOUT_OPS and sources and all(
                name in info.initializers or name in origin for name in node.input if name):
            origin.update((name, sources[0]) for name in node.output if name)
    return origin


def _weight_operands(node, origin: dict[str, str]) -> list[str]:
    """The names of the inputs of `node` that are weights it owns: initializers
    (or layout views of one) at its weight positions; a MatMul's only where the other operand
    is computed by the model, a Gather's table only where its indices are."""
    inputs = list(node.input)
    if node.op_type == "Gather":
        positions = (0,) if len(inputs) > 1 and inputs[1] not in origin else ()
    elif node.op_type == "MatMul":
        positions = tuple(i for i in (0, 1) if len(inputs) > 1 and inputs[1 - i] not in origin)
    else:
        positions = WEIGHT_OPERANDS.get(node.op_type, ())
    return [inputs[i] for i in positions if i < len(inputs) and inputs[i] in origin]


def _statistics(info: GraphInfo, origin: dict[str, str]) -> set[str]:
    """Initializers that are running statistics of a normalisation, or initial states."""
    return {origin[node.input[i]] for node in info.nodes
            for i in STATISTIC_OPERANDS.get(node.op_type, ())
            if i < len(node.input) and node.input[i] in origin}


def _unit_affine(info: GraphInfo, origin: dict[str, str]) -> set[str]:
    """Scales of ones and biases of zeros of instance and group normalisations, not named as
    a module's parameters: the constants of a normalisation written without an affine part."""
    found = set()
    for node in info.nodes:
        if node.op_type not in ("InstanceNormalization", "GroupNormalization"):
            continue
        for position, unit in ((1, 1.0), (2, 0.0)):
            name = origin.get(node.input[position]) if position < len(node.input) else None
            if (name is not None and not PARAMETER_NAME.search(name)
                    and bool(np.all(info.initializers[name] == unit))):
                found.add(name)
    return found


def _affine(info: GraphInfo, origin: dict[str, str]) -> set[str]:
    """Initializers of more than one element applied to the output of an operator that owns
    weights (or a layout of it: GroupNorm's regrouped channels), or to the result of such an
    application: added (a bias), or multiplied where they are a vector along one dim (a
    per-channel scale: a batch norm written out as Mul and Add)."""
    applied = {node.output[0] for node in info.nodes
               if node.output and _weight_operands(node, origin)}
    found = set()
    for node in info.nodes:
        if node.op_type in LAYOUT_OPS and node.input and node.input[0] in applied:
            applied.update(node.output)
        if node.op_type not in ("Add", "Mul") or not applied.intersection(node.input):
            continue
        operands = [origin[name] for name in node.input if name in origin
                    and _applies(node.op_type, info.initializers[origin[name]])]
        if operands:
            found.update(operands)
            applied.add(node.output[0])
    return found


def _applies(op_type: str, array: np.ndarray) -> bool:
    if array.size < 2:
        return False
    return op_type == "Add" or sum(d > 1 for d in array.shape) == 1


def _warn_undecided(info: GraphInfo, constants: set[str]) -> None:
    undecided = sorted(name for name in constants if _could_be_trained(info.initializers[name]))
    if undecided:
        warnings.warn(ONNXImportWarning(
            f"{info.source}: {len(undecided)} float initializer(s) read only by element-wise "
            f"operators, where the graph does not tell a parameter from a constant, are kept "
            f"constant: {_listed(info, undecided)}; if any is a parameter of the model, name "
            f"the parameters: ONNXModel(..., parameters=[...])"), stacklevel=4)


def _copies(info: GraphInfo, parameters: set[str]) -> list[tuple[str, str]]:
    """Pairs of parameters of more than one value that hold the same values, or one the
    other's transpose: torch's current exporter writes a weight tied to another (GPT-2's output
    layer to its token embedding) as a transposed copy."""
    found = []
    arrays = sorted((name, info.initializers[name]) for name in parameters)
    for i, (name, array) in enumerate(arrays):
        if array.size < 2 or bool((array == array.flat[0]).all()):
            continue
        for other, candidate in arrays[i + 1:]:
            if candidate.size == array.size and (
                    np.array_equal(candidate, array)
                    or (array.ndim == 2 and np.array_equal(candidate, array.T))):
                found.append((name, other))
    return found


def _warn_tied(info: GraphInfo, shared: dict[str, list[str]],
               copies: list[tuple[str, str]]) -> None:
    described = [f"'{name}' by {', '.join(readers)}" for name, readers in sorted(shared.items())]
    described += [f"'{a}' and '{b}' (equal, or transposed)" for a, b in copies]
    if described:
        warnings.warn(ONNXImportWarning(
            f"{info.source}: initializers read by several layers that own weights, and "
            f"parameters stored twice, train a separate copy in each layer (right for equal "
            f"parameters, wrong for tied ones, which the file does not tell apart): "
            f"{'; '.join(described[:LISTED])}"
            + (f" and {len(described) - LISTED} more" if len(described) > LISTED else "")),
            stacklevel=4)


def _could_be_trained(array: np.ndarray) -> bool:
    return array.size > 1 and bool(np.all(np.abs(array) < MASK_MAGNITUDE))


def _listed(info: GraphInfo, names: list[str]) -> str:
    shown = ", ".join(f"'{n}' {tuple(info.initializers[n].shape)}" for n in names[:LISTED])
    return shown + (f" and {len(names) - LISTED} more" if len(names) > LISTED else "")


def broadcast_source(array: np.ndarray) -> np.ndarray:
    """`array` with each dim along which all its slices are equal reduced to one slice (kept as
    a dim of 1); `array` itself when it has one dim, no such dim, or a single value."""
    if array.ndim < 2 or array.size < 2 or bool((array == array.flat[0]).all()):
        return array
    source = array
    for axis in range(array.ndim):
        first = np.take(source, [0], axis=axis)
        if source.shape[axis] > 1 and np.array_equal(np.broadcast_to(first, source.shape),
                                                     source):
            source = first
    return source
