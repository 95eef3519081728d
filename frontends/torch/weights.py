"""Weights carried from a torch model into the FlexFlow layers built from it.

`TorchState` holds, per FX node, the torch parameters and buffers of the module it calls (under
torch's own names: `weight`, `bias`, `running_mean`, `in_proj_weight`, `out_proj.weight`, ...),
the value of each `get_attr` node, and which nodes call a module an earlier node already called
(their layers share that node's weights).

On disk it is `<file>.ff.npz` beside the `.ff` file, a NumPy `.npz` archive written and read by
`flexflow.archive` (never unpickled; each array's declared size checked before it is read):

* `<node>/<torch name>`: a float32 array, e.g. `conv1/weight`, `bn1/running_var`;
* `<node>/parameter` or `<node>/buffer`: the value of a `get_attr` node (a trainable
  `nn.Parameter` or a constant buffer);
* `__shared__`: a string array of shape (k, 2), rows (node, earlier node whose weights it uses).

`ff_arrays` maps a node's torch tensors to the FlexFlow layer's weights, in the layer's order;
`misfit` says when they do not fit the layer built and why, `load` gives them to the layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from flexflow.archive import Archive, write
from flexflow.type import OpType

from .ir import ConversionError, IRNode

SHARED_KEY = "__shared__"
PARAMETER = "parameter"
BUFFER = "buffer"


def npz_path(ff_filename) -> Path:
    """Where the weights of a `.ff` file live: the same name with `.npz` appended."""
    return Path(str(ff_filename) + ".npz")


@dataclass
class TorchState:
    tensors: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    shared: dict[str, str] = field(default_factory=dict)

    def save(self, path) -> None:
        arrays = {f"{node}/{name}": array for node, named in self.tensors.items()
                  for name, array in named.items()}
        arrays[SHARED_KEY] = np.array(sorted(self.shared.items()), dtype=str).reshape(-1, 2)
        write(path, arrays)

    @classmethod
    def load(cls, path) -> "TorchState":
        """The weights in the archive at `path` (read by `flexflow.archive`: no pickle, declared
        sizes checked before anything is allocated); any defect is a ConversionError naming the
        file and the entry."""
        state = cls()
        with Archive(path, ConversionError, "weights archive") as archive:
            for key in sorted(archive.names):
                shape, dtype = archive.header(key)
                if key == SHARED_KEY:
                    if dtype.kind != "U" or len(shape) != 2 or shape[1] != 2:
                        raise ConversionError(f"{path}: entry {key!r} must be pairs of names, "
                                              f"it is {dtype} of shape {shape}")
                    pairs = archive.array(key, shape, dtype, "the shared weights")
                    state.shared = {str(a): str(b) for a, b in pairs}
                    continue
                node, sep, name = key.partition("/")
                if not sep or not name:
                    raise ConversionError(f"{path}: entry {key!r} is not '<node>/<tensor name>'")
                state.tensors.setdefault(node, {})[name] = archive.array(
                    key, shape, dtype, f"tensor {name!r} of node {node!r}")
        return state


# ---- torch names -> FlexFlow weight order -------------------------------------------------------
def _take(node: IRNode, named: dict, *names: str) -> list[np.ndarray]:
    missing = [name for name in names if name not in named]
    if missing:
        raise node.error(f"the weights hold {sorted(named)}, missing {missing}")
    return [np.asarray(named[name], dtype=np.float32) for name in names]


def _with_bias(node, named, kernel: str, bias: str) -> list[np.ndarray]:
    return _take(node, named, kernel, bias) if bias in named else _take(node, named, kernel)


def _attention(node: IRNode, named: dict) -> list[np.ndarray]:
    """torch.nn.MultiheadAttention's tensors in the order of FlexFlow's multihead_attention:
    q/k/v kernels, q/k/v biases, out kernel, out bias, bias_k, bias_v."""
    if "in_proj_weight" in named:
        kernels = np.split(_take(node, named, "in_proj_weight")[0], 3)
    else:
        kernels = _take(node, named, "q_proj_weight", "k_proj_weight", "v_proj_weight")
    arrays = list(kernels)
    if "in_proj_bias" in named:
        arrays += np.split(_take(node, named, "in_proj_bias")[0], 3)
    arrays += _with_bias(node, named, "out_proj.weight", "out_proj.bias")
    if "bias_k" in named:
        arrays += _take(node, named, "bias_k", "bias_v")
    return arrays


def ff_arrays(node: IRNode, named: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The FlexFlow weights of the layer built for `node`, from its torch tensors."""
    kind = node.op_type
    if kind == OpType.LINEAR:
        return _with_bias(node, named, "weight", "bias")
    if kind == OpType.CONV2D:  # a Conv1d's kernel (O, C, k) is CONV2D's (O, C, 1, k)
        kernel, *bias = _with_bias(node, named, "weight", "bias")
        if kernel.ndim == 3:
            kernel = kernel[:, :, np.newaxis, :]
        return [kernel, *bias]
    if kind == OpType.BATCH_NORM:
        return _take(node, named, "weight", "bias", "running_mean", "running_var")
    if kind == OpType.LAYER_NORM:
        return _with_bias(node, named, "weight", "bias") if "weight" in named else []
    if kind == OpType.EMBEDDING:
        return _take(node, named, "weight")
    if kind == OpType.MULTIHEAD_ATTENTION:
        return _attention(node, named)
    raise node.error(f"weights were given, but a {kind.name} layer has none")


# ---- loading into the model ---------------------------------------------------------------------
# the dims of a layer's weights that its input decides (a kernel's input features or channels);
# the node's own parameters declare the others
INPUT_DECIDED = {OpType.LINEAR: {0: (1,)}, OpType.CONV2D: {0: (1,)},
                 OpType.BATCH_NORM: {k: (0,) for k in range(4)},
                 OpType.LAYER_NORM: {k: tuple(range(8)) for k in range(2)}}


def misfit(node: IRNode, op, arrays: list[np.ndarray]) -> tuple[str, bool] | None:
    """None when `arrays` fit layer `op`; else why not, and whether they differ only in dims
    the layer's input decides (a model whose layers disagree with their inputs, which PyTorch
    could not run) rather than in what the node declares (the weights of another model)."""
    expected = [op.get_parameter_by_id(k).dims for k in range(op.get_number_parameters())]
    got = [tuple(a.shape) for a in arrays]
    if expected == got:
        return None
    decided = INPUT_DECIDED.get(node.op_type, {})
    by_input = len(expected) == len(got) and all(
        len(e) == len(g) and all(a == b or d in decided.get(k, ()) for d, (a, b)
                                 in enumerate(zip(e, g)))
        for k, (e, g) in enumerate(zip(expected, got)))
    why = node.error(f"the torch weights have shapes {got}, the layer built from the node "
                     f"needs {expected}")
    return str(why), by_input


def load(ffmodel, op, arrays: list[np.ndarray]) -> None:
    """Give layer `op` the values `arrays` (shapes checked by `misfit`). Set before compile(),
    they are the values compile() creates the weights with (and creates them with again at
    every later compile())."""
    for k, array in enumerate(arrays):
        op.get_parameter_by_id(k).set_weights(ffmodel, array)
