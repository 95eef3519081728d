"""The valid files the fuzz tests mutate, each written by our own exporters, and the models they
are used with.

* `.ff`: torch models of the front-end tests written by `PyTorchModel.torch_to_file` (v2 lines
  and the `.npz` weights beside them), one of them also in FlexFlow's v1 form, and an MLP in the
  v0 form.
* ONNX: a small MLP exported by torch, and a hand-built graph whose constants are shapes and
  fills that the importer evaluates (ConstantOfShape, Expand, Tile, Range, Pad, Reshape, ...).
* strategies: FlexFlow's text form and JSON, of the strategy tests' models.
* machine models: FlexFlow's version-1 file and our JSON form.
* checkpoints: `FFModel.save_checkpoint` of the strategy tests' MLP after a step of training
  (so the optimizer has state), with SGD with momentum and with Adam.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from flexflow.core import (AdamOptimizer, DataType, FFConfig, FFModel, LossType,
                           SGDOptimizer)
from flexflow.scheduler import machine as machine_module
from flexflow.scheduler import strategy_file
from flexflow.torch.model import PyTorchModel
from flexflow.type import OpType

from ..onnx.torch_models import MLP as OnnxMLP
from ..onnx.torch_models import export
from ..parallel.models import cnn_batch_norm, mlp, strategy
from ..torch import models as torch_models

REPOSITORY = Path(__file__).resolve().parents[2]
NUM_DEVICES = 4

DTYPES = {np.dtype(np.float32): DataType.DT_FLOAT, np.dtype(np.int64): DataType.DT_INT64}


@dataclass
class Seed:
    """A valid file (`main`), the files that go with it, and how to build its model's inputs."""

    name: str
    main: bytes
    suffix: str
    extra: dict[str, bytes] = field(default_factory=dict)  # suffix appended to the path -> bytes
    inputs: list[tuple[tuple[int, ...], np.dtype]] = field(default_factory=list)


def input_tensors(ffmodel, seed: Seed) -> list:
    return [ffmodel.create_tensor(list(shape), DTYPES[np.dtype(dtype)])
            for shape, dtype in seed.inputs]


# ---- .ff ----------------------------------------------------------------------------------------
def ff_seeds(folder: Path) -> list[Seed]:
    cases = [("constructs", torch_models.Constructs(), [((2, 3, 8, 8), np.float32)]),
             ("embedding", torch_models.EmbeddingPositional(),
              [((2, 6), np.int64), ((2, 6), np.int64)]),
             ("attention", torch_models.MatmulAttentionLayer(), [((2, 5, 16), np.float32)]),
             ("factsheet", torch_models.FactSheetCNN(),
              [((2, 3, 16, 16), np.float32), ((2, 3, 16, 16), np.float32)])]
    seeds = []
    for name, model, inputs in cases:
        path = folder / f"{name}.ff"
        PyTorchModel(model).torch_to_file(path)
        text = path.read_bytes()
        weights = {".npz": Path(str(path) + ".npz").read_bytes()}
        seeds.append(Seed(name, text, ".ff", weights, inputs))
        if name == "factsheet":  # v1 has no references to sizes, which the others use
            seeds.append(Seed("factsheet-v1", v1_text(text.decode()).encode(), ".ff", weights,
                              inputs))
    mlp_lines = PyTorchModel(torch_models.MLP()).torch_to_string()
    seeds.append(Seed("mlp-v0", v0_text(mlp_lines).encode(), ".ff", {},
                      [((2, 784), np.float32)]))
    return seeds


def v1_text(v2: str) -> str:
    """FlexFlow's r21 form of v2 lines: `, ` between fields, `:` after each edge name."""
    lines = []
    for line in v2.splitlines():
        fields = line.split("; ")
        if len(fields) >= 4:
            fields[1], fields[2] = fields[1].replace(",", ":"), fields[2].replace(",", ":")
        lines.append(", ".join(fields))
    return "\n".join(lines) + "\n"


def v0_text(v2_lines: list[str]) -> str:
    """FlexFlow's r20.12 form: no consumer list, the op type as its integer value."""
    lines = []
    for line in v2_lines:
        name, inputs, _, op, *params = line.split("; ")
        lines.append(", ".join([name, inputs.replace(",", ":"), str(OpType[op].value), *params]))
    return "\n".join(lines) + "\n"


# ---- ONNX ---------------------------------------------------------------------------------------
def onnx_seeds() -> list[Seed]:
    torch.manual_seed(0)
    exported = export(OnnxMLP(features=12, hidden=8, classes=4), torch.zeros(2, 12), dynamo=False)
    return [Seed("mlp", exported.SerializeToString(), ".onnx", {}, [((2, 12), np.float32)]),
            Seed("folded", folded_graph().SerializeToString(), ".onnx", {},
                 [((2, 3, 4, 4), np.float32)])]


def folded_graph() -> onnx.ModelProto:
    """Convolution, pooling and a dense head whose weights and shapes are constants the importer
    folds: a ConstantOfShape kernel, an expanded bias, a tiled row, a Range, a padded input and
    shape arithmetic (Shape -> Gather -> Concat -> Reshape)."""
    def const(name, array):
        return numpy_helper.from_array(np.asarray(array), name)

    def ints(name, values):
        return const(name, np.asarray(values, np.int64))

    node = helper.make_node
    nodes = [
        node("ConstantOfShape", ["kernel_shape"], ["kernel"],
             value=helper.make_tensor("fill", TensorProto.FLOAT, [1], [0.1])),
        node("Expand", ["bias_one", "bias_shape"], ["bias"]),
        node("Pad", ["x", "pads"], ["padded"], mode="constant"),
        node("Conv", ["padded", "kernel", "bias"], ["conv"], kernel_shape=[3, 3], strides=[1, 1]),
        node("Relu", ["conv"], ["relu"]),
        node("MaxPool", ["relu"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Shape", ["pool"], ["shape"]),
        node("Gather", ["shape", "zero"], ["batch"], axis=0),
        node("Concat", ["batch", "minus_one"], ["flat_shape"], axis=0),
        node("Reshape", ["pool", "flat_shape"], ["flat"]),
        node("Tile", ["row", "repeats"], ["weight"]),
        node("Range", ["start", "limit", "delta"], ["steps"]),
        node("Cast", ["steps"], ["steps_float"], to=TensorProto.FLOAT),
        node("MatMul", ["flat", "weight"], ["dense"]),
        node("Add", ["dense", "steps_float"], ["logits"]),
        node("Split", ["logits", "halves"], ["left", "right"], axis=1),
        node("Concat", ["right", "left"], ["swapped"], axis=1),
        node("Transpose", ["swapped"], ["transposed"], perm=[1, 0]),
        node("Transpose", ["transposed"], ["back"], perm=[1, 0]),
        node("Softmax", ["back"], ["y"], axis=1),
    ]
    initializers = [
        ints("kernel_shape", [4, 3, 3, 3]), const("bias_one", np.ones(1, np.float32)),
        ints("bias_shape", [4]), ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]), ints("zero", [0]),
        ints("minus_one", [-1]), const("row", np.full((16, 1), 0.01, np.float32)),
        ints("repeats", [1, 4]), const("start", np.int64(0)), const("limit", np.int64(4)),
        const("delta", np.int64(1)), ints("halves", [2, 2])]
    graph = helper.make_graph(
        nodes, "folded", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


# ---- strategies ---------------------------------------------------------------------------------
STRATEGY_MODELS = {"mlp": mlp, "cnn": cnn_batch_norm}


def strategy_model(name: str) -> FFModel:
    """The model a strategy seed was written for (built, not compiled)."""
    ff = FFModel(FFConfig(argv=[], batch_size=8))
    STRATEGY_MODELS[name](ff)
    return ff


def strategy_seeds() -> list[Seed]:
    seeds = []
    for name in STRATEGY_MODELS:
        config = strategy("reshard", strategy_model(name).graph, NUM_DEVICES)
        seeds.append(Seed(name, strategy_file.dumps_text(config).encode(), ".txt"))
        seeds.append(Seed(f"{name}-json", strategy_file.dumps_json(config).encode(), ".json"))
    return seeds


# ---- machine models -----------------------------------------------------------------------------
FLEXFLOW_MACHINE = (REPOSITORY / "docs" / "machine-2x2.txt").read_bytes()
FLEXFLOW_MACHINE_FULL = b"""\
num_nodes = 1
num_sockets_per_node = 2
num_cpus_per_socket = 4
num_gpus_per_socket = 2
nic_persocket = 1
membus_latency = 0.0001
membus_bandwidth = 20
upi_latency = 0.0004
upi_bandwidth = 10.5
nic_latency = 0.0005
nic_bandwidth = 12
pci_latency = 0.001
pci_bandwidth = 12.5
nvlink_latency = 0.001
nvlink_bandwidth = 18.5
intra_socket_gpu_fb_mem_to_gpu_fb_mem = nvlink
inter_socket_gpu_fb_mem_to_gpu_fb_mem = pci_to_host upi pci_to_dev
inter_node_gpu_fb_mem_to_gpu_fb_mem = pci_to_host nic pci_to_dev
intra_socket_sys_mem_to_gpu_fb_mem = membus pci_to_dev
gpu_fb_mem_mb = 16000
gpu_peak_tflops = 14
task_overhead = 0.3
"""


def machine_seeds(folder: Path) -> list[Seed]:
    path = folder / "machine.json"
    machine = machine_module.from_flexflow(FLEXFLOW_MACHINE.decode(), "machine-2x2.txt")
    machine.costs = {"GPU": {"dense-forward": 0.25}}
    machine_module.save(machine, str(path))
    return [Seed("flexflow", FLEXFLOW_MACHINE, ".txt"),
            Seed("flexflow-full", FLEXFLOW_MACHINE_FULL, ".txt"),
            Seed("json", path.read_bytes(), ".json")]


# ---- checkpoints --------------------------------------------------------------------------------
OPTIMIZERS = {"sgd": lambda ff: SGDOptimizer(ff, 0.01, momentum=0.9),
              "adam": lambda ff: AdamOptimizer(ff, 0.001)}


def checkpoint_model(optimizer: str):
    """The strategy tests' MLP, compiled with `optimizer` ("sgd" or "adam"), and its input."""
    ff = FFModel(FFConfig(argv=[], batch_size=8))
    (x,) = mlp(ff)
    ff.compile(optimizer=OPTIMIZERS[optimizer](ff),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff, x


def checkpoint_seeds(folder: Path) -> list[Seed]:
    seeds = []
    rng = np.random.default_rng(0)
    for optimizer in OPTIMIZERS:
        ff, x = checkpoint_model(optimizer)
        x.set_tensor(ff, rng.standard_normal(x.dims).astype(np.float32))
        ff.label_tensor.set_tensor(ff, rng.integers(0, 4, (8, 1)).astype(np.int32))
        ff.train_step()
        path = folder / f"{optimizer}.ckpt"
        ff.save_checkpoint(path)
        seeds.append(Seed(optimizer, path.read_bytes(), ".ckpt"))
    return seeds
