"""Hugging Face GPT-2 (GPT2LMHeadModel), BERT (BertModel) and a Llama decoder (LlamaForCausalLM),
small and randomly initialised, exported by torch's legacy (TorchScript) and current (dynamo)
exporters, import through flexflow.onnx and give PyTorch's outputs; three SGD steps give its
losses within float32 noise, on one device and on two; and no constant of the file (an
initializer that training PyTorch's model leaves unchanged) changes while FlexFlow trains."""

import warnings

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the Hugging Face models need transformers")
import torch  # noqa: E402

from flexflow.core import (CompMode, DataType, FFConfig, FFModel, LossType,  # noqa: E402
                           SGDOptimizer)
from flexflow.onnx.errors import ONNXImportWarning  # noqa: E402
from flexflow.onnx.model import ONNXModel  # noqa: E402

from . import hf_models as hf  # noqa: E402

LR, STEPS = 0.1, 3
TWO_DEVICES = ["-ll:gpu", "2", "--in-process"]
# (model, attention implementation, dynamo exporter): each model through both exporters; sdpa
# attention writes the masked softmax (IsNaN, Where) into the graph, eager attention does not.
EXPORTS = [("gpt2", "sdpa", False), ("gpt2", "sdpa", True), ("bert", "eager", False),
           ("bert", "sdpa", True), ("llama", "eager", False), ("llama", "sdpa", True)]
IDS = [f"{n}-{a}-{'dynamo' if d else 'torchscript'}" for n, a, d in EXPORTS]


@pytest.fixture(scope="module")
def exported():
    cache = {}

    def get(name, attention, dynamo):
        key = (name, attention, dynamo)
        if key not in cache:
            cache[key] = hf.export(hf.build(name, attention), dynamo)
        return cache[key]
    return get


def imported(proto, name, argv=()):
    """(ffmodel, ids tensor, output) for the file, warnings recorded (tied weights)."""
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always", ONNXImportWarning)
        onnx_model = ONNXModel(proto)
        ffmodel = FFModel(FFConfig(argv=list(argv), batch_size=hf.BATCH))
        ids = ffmodel.create_tensor([hf.BATCH, hf.SEQ], DataType.DT_INT64)
        out = onnx_model.apply(ffmodel, {next(iter(onnx_model.inputs)): ids})
    ffmodel.warned = [str(w.message) for w in warned if w.category is ONNXImportWarning]
    return ffmodel, ids, out


def ff_forward(proto, name, argv=()):
    ffmodel, ids, out = imported(proto, name, argv)
    ffmodel.compile(comp_mode=CompMode.INFERENCE)
    ids.set_tensor(ffmodel, hf.token_ids(2).numpy())
    ffmodel.forward(training=False)
    return out.get_tensor(ffmodel)


def ff_training(proto, name, argv=()):
    """FlexFlow's losses of the SGD steps `hf.torch_losses` takes, and its weights before and
    after them (layer name -> list of arrays)."""
    ffmodel, ids, out = imported(proto, name, argv)
    if hf.MODELS[name][1]:
        ffmodel.softmax(out)
        loss = LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY
    else:
        loss = LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, LR), loss_type=loss)
    before = weights_of(ffmodel)
    losses = []
    for step in range(STEPS):
        ids.set_tensor(ffmodel, hf.token_ids(10 + step).numpy())
        ffmodel.label_tensor.set_tensor(ffmodel, hf.targets(name, step))
        losses.append(ffmodel.train_step())
    return losses, before, weights_of(ffmodel), ffmodel.warned


def weights_of(ffmodel) -> dict[str, list[np.ndarray]]:
    return {op.op_name: [op.get_parameter_by_id(k).get_weights(ffmodel)
                         for k in range(op.get_number_parameters())]
            for op in ffmodel.get_layers().values() if op.get_number_parameters()}


@pytest.mark.parametrize("name, attention, dynamo", EXPORTS, ids=IDS)
def test_imported_model_gives_torch_outputs(exported, name, attention, dynamo):
    got = ff_forward(exported(name, attention, dynamo), name)
    with torch.no_grad():
        want = hf.build(name, attention)(hf.token_ids(2)).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def assert_losses_match(name, attention, losses):
    """FlexFlow's losses are torch's float32 ones within the float32 noise of this run: the
    distance of torch's float32 losses from its float64 ones, with room for a different order
    of summation (4x), and never below a few float32 ulps of the loss."""
    model = hf.untied(hf.build(name, attention))
    want32 = np.array(hf.torch_losses(name, model, LR, STEPS))
    want64 = np.array(hf.torch_losses(name, model, LR, STEPS, torch.float64))
    noise = np.abs(want32 - want64).max()
    tolerance = max(4 * noise, 8 * np.finfo(np.float32).eps * np.abs(want64).max())
    np.testing.assert_allclose(losses, want64, rtol=0, atol=tolerance)
    assert not np.allclose(want64[0], want64[1:], rtol=1e-3)  # the steps do change the model


@pytest.mark.parametrize("name, attention, dynamo", EXPORTS, ids=IDS)
def test_imported_model_trains_like_torch(exported, name, attention, dynamo):
    losses, *_ = ff_training(exported(name, attention, dynamo), name)
    assert_losses_match(name, attention, losses)
