"""Hugging Face GPT-2 (GPT2LMHeadModel), BERT (BertModel) and a Llama decoder (LlamaForCausalLM),
small and randomly initialised, exported by torch's legacy (TorchScript) and current (dynamo)
exporters, import through flexflow.onnx and give PyTorch's outputs; three SGD steps give its
losses within float32 noise, on one device and on two; and no constant of the file (an
initializer that training PyTorch's model leaves unchanged) changes while FlexFlow trains."""

import warnings

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

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
    return _cached(lambda name, attention, dynamo: hf.export(hf.build(name, attention), dynamo))


@pytest.fixture(scope="module")
def torch_runs():
    """(name, attention) -> (float32 losses, float64 losses) of the untied model (GPT-2's output
    layer a copy of its embedding, as the import trains it)."""
    def run(name, attention):
        model = hf.untied(hf.build(name, attention))
        return tuple(np.array(hf.torch_training(name, model, LR, STEPS, dtype)[0])
                     for dtype in (torch.float32, torch.float64))
    return _cached(run)


def _cached(compute):
    cache = {}

    def get(*key):
        if key not in cache:
            cache[key] = compute(*key)
        return cache[key]
    return get


def imported(proto, argv=()):
    """(ffmodel, ids tensor, output, the import's warnings) for the file."""
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always", ONNXImportWarning)
        onnx_model = ONNXModel(proto)
        ffmodel = FFModel(FFConfig(argv=list(argv), batch_size=hf.BATCH))
        ids = ffmodel.create_tensor([hf.BATCH, hf.SEQ], DataType.DT_INT64)
        out = onnx_model.apply(ffmodel, {next(iter(onnx_model.inputs)): ids})
    return ffmodel, ids, out, [str(w.message) for w in warned if w.category is ONNXImportWarning]


def ff_forward(proto, argv=()):
    ffmodel, ids, out, _ = imported(proto, argv)
    ffmodel.compile(comp_mode=CompMode.INFERENCE)
    ids.set_tensor(ffmodel, hf.token_ids(2).numpy())
    ffmodel.forward(training=False)
    return out.get_tensor(ffmodel)


def ff_training(proto, name, argv=()):
    """FlexFlow's losses of the SGD steps `hf.torch_training` takes, its weights before and
    after them (lists of arrays), and the import's warnings."""
    ffmodel, ids, out, warned = imported(proto, argv)
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
    return np.array(losses), before, weights_of(ffmodel), warned


def weights_of(ffmodel) -> list[np.ndarray]:
    return [op.get_parameter_by_id(k).get_weights(ffmodel)
            for op in ffmodel.get_layers().values() for k in range(op.get_number_parameters())]


@pytest.mark.parametrize("argv", [[], TWO_DEVICES], ids=["1-device", "2-devices"])
@pytest.mark.parametrize("name, attention, dynamo", EXPORTS, ids=IDS)
def test_imported_model_gives_torch_outputs(exported, name, attention, dynamo, argv):
    got = ff_forward(exported(name, attention, dynamo), argv)
    with torch.no_grad():
        want = hf.build(name, attention)(hf.token_ids(2)).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


TRAINING_RUNS = [pytest.param(*export, argv, id=f"{ident}-{'2-devices' if argv else '1-device'}")
                 for export, ident in zip(EXPORTS, IDS) for argv in ([], TWO_DEVICES)]


@pytest.mark.parametrize("name, attention, dynamo, argv", TRAINING_RUNS)
def test_imported_model_trains_like_torch(exported, torch_runs, name, attention, dynamo, argv):
    """FlexFlow's losses are torch's within the float32 noise of this run: the distance of
    torch's float32 losses from its float64 ones, with room for another order of summation
    (4x), and never below a few float32 ulps of the loss. GPT-2's output layer and embedding
    are one tied weight in torch, which the import trains as two, and says so."""
    losses, _, _, warned = ff_training(exported(name, attention, dynamo), name, argv)
    assert_torch_losses(losses, *torch_runs(name, attention))
    assert any("tied" in w for w in warned) == (name == "gpt2"), warned


def assert_torch_losses(losses, want32, want64):
    noise = np.abs(want32 - want64).max()
    tolerance = max(4 * noise, 8 * np.finfo(np.float32).eps * np.abs(want64).max())
    np.testing.assert_allclose(losses, want64, rtol=0, atol=tolerance)
    assert not np.allclose(want64[0], want64[1:], rtol=1e-3)  # the steps do change the model


@pytest.mark.parametrize("name, attention, dynamo", EXPORTS, ids=IDS)
def test_no_constant_of_the_file_changes_in_training(exported, name, attention, dynamo):
    """Every initializer of the file is looked at: exported again after torch's training, the
    ones torch left unchanged are its constants, and no FlexFlow weight that held one changes
    in FlexFlow's training; each one torch changed is held by a FlexFlow weight that
    changes."""
    proto = exported(name, attention, dynamo)
    _, trained = hf.torch_training(name, hf.build(name, attention), LR, STEPS)
    again = hf.export(trained, dynamo)
    _, before, after, _ = ff_training(proto, name)
    initial, trained = initializers(proto), initializers(again)
    assert initial.keys() == trained.keys()
    for key, array in initial.items():
        holders = [i for i, w in enumerate(before) if holds(w, array)]
        changed = [i for i in holders if not np.array_equal(before[i], after[i])]
        if np.array_equal(array, trained[key]):
            assert not changed, f"constant {key} {array.shape} trains"
        else:
            assert changed, f"parameter {key} {array.shape} does not train"


def initializers(proto) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer
            if i.data_type == onnx.TensorProto.FLOAT}


def holds(weight: np.ndarray, array: np.ndarray) -> bool:
    """Whether a FlexFlow weight holds the initializer's values: the same elements (in any
    shape), transposed (a dense layer's kernel), or one slice they repeat."""
    if weight.size == array.size:
        return (np.array_equal(weight.reshape(-1), array.reshape(-1))
                or np.array_equal(weight.T.reshape(-1), array.reshape(-1)))
    return (weight.ndim == array.ndim and weight.size > 1
            and all(w in (1, a) for w, a in zip(weight.shape, array.shape))
            and np.array_equal(np.broadcast_to(weight, array.shape), array))


def test_imported_decoder_on_a_two_worker_cluster(exported, torch_runs):
    """`-ll:gpu 2` without `--in-process`: a Dask cluster of two worker processes runs the
    Llama decoder's forward and its training steps, with PyTorch's outputs and losses."""
    argv = ["-ll:gpu", "2"]
    proto = exported("llama", "eager", False)
    with torch.no_grad():
        want = hf.build("llama", "eager")(hf.token_ids(2)).numpy()
    np.testing.assert_allclose(ff_forward(proto, argv), want, rtol=1e-5, atol=1e-5)
    assert_torch_losses(ff_training(proto, "llama", argv)[0], *torch_runs("llama", "eager"))
