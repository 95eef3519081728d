"""Seeded mutations of valid files, the inputs of the fuzz tests.

A `Mutator` turns the bytes of a valid file into a hostile variant and says what it did, so a
failing case can be reproduced from its description and seed. Three levels:

* bytes: truncate, flip or insert bytes, duplicate a chunk (any file, binary ones included);
* lines and tokens: delete, duplicate or swap lines, replace a number with a huge, negative,
  zero, non-finite or non-numeric value, deep nesting (text files);
* JSON values: replace a value with one of the wrong type, delete a key, nest deeply.

Every choice comes from `random.Random(seed)`, so a run is the same every time.
"""

from __future__ import annotations

import json
import random
import re

import numpy as np

NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# what a number is replaced with: huge (past 2**40 elements), negative, zero, non-finite,
# non-numeric, too many digits for int(), nested
HOSTILE_NUMBERS = (b"0", b"-1", b"-5", b"1099511627777", b"99999999999999999999", b"1e308",
                   b"1e999", b"-1e999", b"inf", b"nan", b"1.5", b"abc", b"", b"0x10", b"True",
                   b"9" * 5000, b"(" * 300 + b"1" + b")" * 300, b"[" * 300 + b"1" + b"]" * 300)
WRONG_JSON_VALUES = ("x", "", [], {}, None, True, 0, -1, 1.5, 2 ** 70, 1e308, [1, "a"],
                     {"a": 1}, [[[[[[[[[[1]]]]]]]]]])
DEEP = 100_000  # nesting beyond any parser's recursion limit


class Mutator:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    # ---- bytes ----------------------------------------------------------------------------------
    def bytes(self, data: bytes) -> tuple[bytes, str]:
        rng, n = self.rng, len(data)
        if not n:
            return bytes([rng.randrange(256)]), "a random byte written to an empty file"
        kind = rng.choice(("truncate", "flip", "insert", "duplicate", "zero"))
        at = rng.randrange(n)
        if kind == "truncate":
            return data[:at], f"truncated at byte {at}"
        if kind == "flip":
            flips = rng.randint(1, 8)
            mutated = bytearray(data)
            for _ in range(flips):
                mutated[rng.randrange(n)] ^= 1 << rng.randrange(8)
            return bytes(mutated), f"{flips} bit flip(s)"
        if kind == "insert":
            chunk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
            return data[:at] + chunk + data[at:], f"{len(chunk)} random bytes inserted at {at}"
        if kind == "duplicate":
            end = min(n, at + rng.randint(1, 64))
            return data[:end] + data[at:end] + data[end:], f"bytes {at}:{end} duplicated"
        end = min(n, at + rng.randint(1, 16))
        return data[:at] + bytes(end - at) + data[end:], f"bytes {at}:{end} zeroed"

    # ---- lines and tokens -----------------------------------------------------------------------
    def text(self, data: bytes) -> tuple[bytes, str]:
        """A line- or token-level change, or (one time in four) a byte-level one."""
        rng = self.rng
        kind = rng.choice(("bytes", "number", "number", "number", "delete", "duplicate", "swap",
                           "token", "nest"))
        if kind == "bytes":
            return self.bytes(data)
        if kind in ("number", "nest"):
            numbers = list(NUMBER.finditer(data))
            if numbers:
                match = rng.choice(numbers)
                new = (b"(" * DEEP if kind == "nest" else rng.choice(HOSTILE_NUMBERS))
                return (data[:match.start()] + new + data[match.end():],
                        f"number {match.group()!r} at {match.start()} -> {new[:20]!r}")
        lines = data.split(b"\n")
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        if kind == "delete":
            return b"\n".join(lines[:i] + lines[i + 1:]), f"line {i + 1} deleted"
        if kind == "duplicate":
            return b"\n".join(lines[:j] + [lines[i]] + lines[j:]), \
                f"line {i + 1} copied before line {j + 1}"
        if kind == "swap":
            lines[i], lines[j] = lines[j], lines[i]
            return b"\n".join(lines), f"lines {i + 1} and {j + 1} swapped"
        tokens = re.findall(rb"[^\s;,:=]+", data)
        if not tokens:
            return self.bytes(data)
        old, new = rng.choice(tokens), rng.choice(tokens)
        return data.replace(old, new, 1), f"token {old[:20]!r} -> {new[:20]!r}"

    # ---- JSON -----------------------------------------------------------------------------------
    def json(self, data: bytes) -> tuple[bytes, str]:
        """A change to one value of the parsed document, or (one time in three) to its text."""
        rng = self.rng
        if rng.random() < 1 / 3:
            return self.text(data)
        document = json.loads(data)
        path = self._random_path(document)
        parent, key = self._locate(document, path)
        kind = rng.choice(("wrong type", "wrong type", "delete", "deep"))
        if parent is None:
            return self.text(data)
        if kind == "delete":
            del parent[key]
            return json.dumps(document).encode(), f"{path} deleted"
        if kind == "deep":
            text = json.dumps(document).replace(json.dumps(parent[key]), "[" * DEEP, 1)
            return text.encode(), f"{path} nested {DEEP} deep"
        value = rng.choice(WRONG_JSON_VALUES)
        parent[key] = value
        return json.dumps(document).encode(), f"{path} -> {value!r}"

    def _random_path(self, document) -> list:
        """A path to a random value, walking down with a chance of stopping at each level."""
        path, node = [], document
        while isinstance(node, (dict, list)) and node and self.rng.random() < 0.8:
            key = (self.rng.choice(list(node)) if isinstance(node, dict)
                   else self.rng.randrange(len(node)))
            path.append(key)
            node = node[key]
        return path

    @staticmethod
    def _locate(document, path):
        if not path:
            return None, None
        node = document
        for key in path[:-1]:
            node = node[key]
        return node, path[-1]


# ---- ONNX ---------------------------------------------------------------------------------------
HOSTILE_INTS = (0, -1, -7, 1, 3, 1000, 2 ** 31, 2 ** 40 + 1, 2 ** 62)
HOSTILE_FLOATS = (0.0, -1.0, float("nan"), float("inf"), 1e30)


def mutate_onnx(mutator: Mutator, data: bytes) -> tuple[bytes, str]:
    """One time in four a byte-level change of the serialized model (which protobuf mostly
    refuses), else a change to its graph: an initializer's dims or values, an attribute, an
    operator, an edge (cycles included), a node removed or repeated, a graph input's dims, the
    opset."""
    import onnx
    from onnx import numpy_helper

    rng = mutator.rng
    if rng.random() < 0.25:
        return mutator.bytes(data)
    model = onnx.load_from_string(data)
    graph = model.graph
    kind = rng.choice(("dims", "values", "values", "values", "attribute", "attribute",
                       "attribute", "op", "edge", "edge", "remove", "repeat", "input", "opset"))
    node = rng.choice(graph.node)
    if kind == "dims" and graph.initializer:
        tensor = rng.choice(graph.initializer)
        if tensor.dims:
            tensor.dims[rng.randrange(len(tensor.dims))] = rng.choice(HOSTILE_INTS)
        what = f"initializer {tensor.name} dims -> {list(tensor.dims)}"
    elif kind == "values" and graph.initializer:
        tensor = rng.choice(graph.initializer)
        array = numpy_helper.to_array(tensor).copy()
        if array.size:
            flat = array.reshape(-1)
            if array.dtype.kind in "iu":
                limits = np.iinfo(array.dtype)
                hostile = min(max(rng.choice(HOSTILE_INTS), limits.min), limits.max)
            else:
                hostile = rng.choice(HOSTILE_FLOATS)
            flat[rng.randrange(flat.size)] = hostile
        tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
        what = f"initializer {tensor.name} values changed"
    elif kind == "attribute" and node.attribute:
        attribute = rng.choice(node.attribute)
        what = f"node {node.name} ({node.op_type}) attribute {attribute.name}"
        if attribute.type == onnx.AttributeProto.INT:
            attribute.i = rng.choice(HOSTILE_INTS)
        elif attribute.type == onnx.AttributeProto.INTS and attribute.ints:
            attribute.ints[rng.randrange(len(attribute.ints))] = rng.choice(HOSTILE_INTS)
        elif attribute.type == onnx.AttributeProto.FLOAT:
            attribute.f = rng.choice(HOSTILE_FLOATS)
        elif attribute.type == onnx.AttributeProto.TENSOR and attribute.t.dims:
            attribute.t.dims[0] = rng.choice(HOSTILE_INTS)
        else:
            attribute.type = onnx.AttributeProto.STRING
            attribute.s = b"bogus"
    elif kind == "op":
        node.op_type = rng.choice([n.op_type for n in graph.node] + ["Bogus", "Loop", "If"])
        what = f"node {node.name} op type -> {node.op_type}"
    elif kind == "edge" and node.input:
        values = [n for other in graph.node for n in other.output] + [i.name for i in graph.input]
        index = rng.randrange(len(node.input))
        node.input[index] = rng.choice(values + ["", "missing"])
        what = f"node {node.name} input {index} -> {node.input[index]!r}"
    elif kind == "remove":
        graph.node.remove(node)
        what = f"node {node.name} removed"
    elif kind == "repeat":
        graph.node.append(node)
        what = f"node {node.name} repeated"
    elif kind == "input":
        value = rng.choice(graph.input)
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[rng.randrange(len(dims))].dim_value = max(rng.choice(HOSTILE_INTS), 0)
        what = f"graph input {value.name} dims changed"
    else:
        model.opset_import[0].version = rng.choice((0, 1, 7, 999))
        what = f"opset -> {model.opset_import[0].version}"
    return model.SerializeToString(), what


# ---- .npz archives ------------------------------------------------------------------------------
def mutate_archive(mutator: Mutator, data: bytes) -> tuple[bytes, str]:
    """One time in four a byte-level change of the zip (which its CRCs mostly catch), else a
    change to its arrays: a member's shape, dtype (an object array, which only pickle can read,
    included) or values, a member deleted or added, or a mutation of a text member (a JSON
    document, as a checkpoint's metadata, or plain text)."""
    import io

    rng = mutator.rng
    if rng.random() < 0.25:
        return mutator.bytes(data)
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:  # our own valid seed
        arrays = {name: archive[name] for name in archive.files}
    name = rng.choice(sorted(arrays))
    array = arrays[name]
    kind = rng.choice(("text", "text", "shape", "dtype", "values", "delete", "add"))
    if array.dtype.kind == "U" and kind in ("text", "values"):
        text = str(array.reshape(-1)[0]) if array.size else ""
        try:
            json.loads(text)
            mutated, what = mutator.json(text.encode())
        except ValueError:
            mutated, what = mutator.text(text.encode())
        arrays[name] = np.array(mutated.decode("utf-8", "replace"))
    elif kind == "shape":
        arrays[name] = array.reshape(-1)[:max(array.size - 1, 0)] if rng.random() < 0.5 \
            else np.concatenate([array.reshape(-1)] * 2)
        what = f"shape -> {arrays[name].shape}"
    elif kind == "dtype":
        dtype = rng.choice((np.float64, np.int32, np.bool_, object))
        arrays[name] = array.astype(object if array.dtype.kind == "U" else dtype)
        what = f"dtype -> {arrays[name].dtype}"
    elif kind == "values" and array.dtype.kind == "f" and array.size:
        array = array.copy()
        array.reshape(-1)[rng.randrange(array.size)] = rng.choice(HOSTILE_FLOATS)
        arrays[name] = array
        what = "a value made hostile"
    elif kind == "add":
        arrays[f"{name}_extra"] = array
        what = "a member added"
    else:
        del arrays[name]
        what = "deleted"
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # an object array is pickled into the file: hostile on purpose
    return buffer.getvalue(), f"entry {name!r}: {what}"
