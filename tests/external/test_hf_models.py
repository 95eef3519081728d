"""Hugging Face models through the torch front end's torch.export route (torch.fx cannot trace
them): GPT-2 (its output projection tied to the token embedding), BERT and a Llama-style decoder
(RMS norm, rotary tables, grouped key/value heads, SiLU), tiny and randomly initialised, with
eager and scaled-dot-product attention, called with token ids alone and with an attention_mask
that pads some positions. Their forward matches PyTorch's within 1e-5, in-process and through a
`.ff` file; three SGD steps give PyTorch's losses as closely as PyTorch's own float32 run gives
its float64 one, on one device and on two; what cannot be translated is named all at once."""

import copy

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

transformers = pytest.importorskip(
    "transformers", reason="the Hugging Face models come from the transformers package")

from flexflow.core import LossType, SGDOptimizer  # noqa: E402
from flexflow.torch.fallbacks import TorchImportWarning  # noqa: E402
from flexflow.torch.ir import ConversionError  # noqa: E402
from flexflow.torch.model import PyTorchModel  # noqa: E402

from ..torch import models, test_training as training  # noqa: E402
from ..torch.conftest import one_torch_thread  # noqa: E402,F401 (autouse: one torch thread)
from ..torch.harness import (assert_outputs_match, ff_model, ff_outputs,  # noqa: E402
                             inference, torch_outputs)

BATCH, SEQ, VOCAB, WIDTH, HEADS = 4, 8, 100, 32, 4
STEPS, LR = 3, 0.05
TWO_DEVICES = ["-ll:gpu", "2", "--in-process"]
INPUT_NAMES = ["input_ids", "attention_mask"]

pytestmark = pytest.mark.filterwarnings("ignore:node 'embedding' .* padding_idx")


def gpt2(attention):
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=2 * SEQ, n_embd=WIDTH, n_layer=2, n_head=HEADS,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
        use_cache=False, attn_implementation=attention))


def bert(attention):
    return transformers.BertModel(transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS,
        intermediate_size=2 * WIDTH, max_position_embeddings=2 * SEQ, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn_implementation=attention))


def llama(attention):
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS,
        num_key_value_heads=HEADS // 2, intermediate_size=2 * WIDTH,
        max_position_embeddings=2 * SEQ, use_cache=False, attn_implementation=attention))


MODELS = {"gpt2": gpt2, "bert": bert, "llama": llama}


def make(name, attention):
    torch.manual_seed(0)
    return MODELS[name](attention)


def tokens(seed=0) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, VOCAB, (BATCH, SEQ)).astype(np.int64)


def padding() -> np.ndarray:
    """An attention_mask (int64, as tokenizers give it) that pads the last 2 tokens of samples
    1 and 3."""
    mask = np.ones((BATCH, SEQ), np.int64)
    mask[1::2, -2:] = 0
    return mask


def build(model, ff, tensors, route, tmp_path=None):
    """Translate a Hugging Face model: exported at once (is_hf_model), after torch.fx fails,
    or through a `.ff` file written for (BATCH, SEQ) token ids (and a mask when there are two
    input tensors)."""
    names = INPUT_NAMES[:len(tensors)]
    if route == "hf":
        return PyTorchModel(model, is_hf_model=True, input_names=names).torch_to_ff(ff, tensors)
    if route == "fx-fails":
        return PyTorchModel(model).torch_to_ff(ff, tensors)
    filename = tmp_path / "model.ff"
    PyTorchModel(model, is_hf_model=True, input_names=names, batch_size=BATCH,
                 seq_length=SEQ).torch_to_file(filename)
    return PyTorchModel.file_to_ff(filename, ff, tensors)


def forward(model, route, inputs, tmp_path):
    """The translated model's outputs and PyTorch's on `inputs` (ids, and a mask if given)."""
    ff, tensors = ff_model(inputs)
    ours = inference(ff, tensors, build(model, ff, tensors, route, tmp_path), inputs)
    with torch.no_grad():
        theirs = [t.numpy() for t in model(**keywords(inputs)).to_tuple()]
    return ours, theirs


def keywords(inputs) -> dict:
    return {name: torch.from_numpy(value) for name, value in zip(INPUT_NAMES, inputs)}


@pytest.mark.parametrize("name, attention, route", [
    (name, attention, "hf") for name in MODELS for attention in ("eager", "sdpa")] + [
    ("gpt2", "sdpa", "file"), ("llama", "sdpa", "file"), ("bert", "eager", "fx-fails")])
def test_forward_matches_pytorch(name, attention, route, tmp_path):
    ours, theirs = forward(make(name, attention).eval(), route, [tokens()], tmp_path)
    assert_outputs_match(ours, theirs, tol=1e-5)


@pytest.mark.parametrize("name, attention, route", [
    (name, attention, "hf") for name in MODELS for attention in ("eager", "sdpa")] + [
    ("gpt2", "eager", "file"), ("bert", "sdpa", "file")])
def test_forward_with_padding_matches_pytorch(name, attention, route, tmp_path):
    """The padding mask is built as layers from the attention_mask input. Every output is
    compared: the padding is on the right, so each query (a padded one too) still sees some
    keys, and PyTorch's outputs are all finite and defined; the padded positions change the
    unpadded ones (the mask does work)."""
    model = make(name, attention).eval()
    ours, theirs = forward(model, route, [tokens(), padding()], tmp_path)
    assert all(np.isfinite(t).all() for t in theirs)
    assert_outputs_match(ours, theirs, tol=1e-5)
    with torch.no_grad():
        unmasked = model(torch.from_numpy(tokens())).to_tuple()[0].numpy()
    assert not np.allclose(unmasked[1], theirs[0][1], atol=1e-3)  # sample 1 is padded
    np.testing.assert_allclose(unmasked[0], theirs[0][0], atol=1e-6)  # sample 0 is not


# ---- training -----------------------------------------------------------------------------------
def batches(name, masked=False):
    """The same batch each step (so the loss falls): token ids (and a padding mask) and, for
    the language models, a next token per position; for BERT a target for its pooled output."""
    rng = np.random.default_rng(1)
    target = (rng.standard_normal((BATCH, WIDTH)).astype(np.float32) if name == "bert"
              else rng.integers(0, VOCAB, (BATCH, SEQ, 1)).astype(np.int32))
    return [((tokens(1), padding()) if masked else (tokens(1),), target)] * STEPS


def torch_losses(model, data) -> np.ndarray:
    """PyTorch's losses as FlexFlow reports them. A language model's gradient is FlexFlow's:
    the cross-entropy summed over the positions and divided by the batch; its loss is the mean
    per position. BERT: the mean squared error of the pooled output."""
    dtype = next(model.parameters()).dtype
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for inputs, target in data:
        out = model(**keywords(inputs))
        if hasattr(out, "logits"):
            labels = torch.from_numpy(target).long().reshape(-1)
            loss = F.cross_entropy(out.logits.reshape(-1, VOCAB), labels,
                                   reduction="sum") / BATCH
            losses.append(loss.item() / SEQ)
        else:
            loss = F.mse_loss(out.pooler_output, torch.from_numpy(target).to(dtype))
            losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return np.array(losses)


def ff_losses(model, data, language: bool, argv=()):
    """The translated model's losses: a softmax and per-token cross-entropy on the logits, or
    (BERT, whose pooler is the last layer built) the mean squared error of the pooled output."""
    ff, tensors = ff_model(data[0][0], argv)
    outputs = build(model, ff, tensors, "hf")
    if language:
        ff.softmax(outputs[0])
    ff.compile(optimizer=SGDOptimizer(ff, lr=LR),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY if language
               else LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE)
    return np.array(training.train_on(ff, tensors, data)), ff


@pytest.mark.parametrize("argv", [(), TWO_DEVICES], ids=["one-device", "two-devices"])
@pytest.mark.parametrize("name, attention, masked", [
    ("gpt2", "eager", False), ("bert", "sdpa", False), ("llama", "eager", False),
    ("gpt2", "sdpa", True), ("bert", "eager", True), ("llama", "sdpa", True)])
def test_training_follows_pytorch(name, attention, masked, argv):
    """Masked: the same with the padding mask as a second input (the padded positions still
    count in the language models' losses, as the losses here weigh every position)."""
    assert_trains_like_pytorch(name, attention, masked, argv)


def test_training_on_a_two_worker_cluster_follows_pytorch():
    """`-ll:gpu 2` without `--in-process`: two Dask worker processes train masked GPT-2."""
    assert_trains_like_pytorch("gpt2", "sdpa", True, ["-ll:gpu", "2"])


def assert_trains_like_pytorch(name, attention, masked, argv):
    model, data = make(name, attention).train(), batches(name, masked)
    exact_model = copy.deepcopy(model).double()
    ours, ff = ff_losses(model, data, name != "bert", argv)  # translated before torch trains it
    split = any(config.degrees[0] == 2 for config in ff.strategy.values())
    assert split == bool(argv)  # the batch is split over the two devices where asked
    theirs, exact = torch_losses(model, data), torch_losses(exact_model, data)
    assert exact[-1] < exact[0]  # it trained
    # as close to the float64 run as 10 times PyTorch's own float32 run, or 1e-6
    noise = np.max(np.abs(theirs - exact) / exact)
    np.testing.assert_allclose(ours, exact, rtol=max(10 * noise, 1e-6))
    if name == "gpt2":  # the tied token embedding and output projection trained as one
        tied = model.transformer.wte.weight.detach().numpy()
        for layer in ("embedding", "linear"):
            weight = ff.get_layer_by_name(layer).get_parameter_by_id(0).get_weights(ff)
            np.testing.assert_allclose(weight, tied, rtol=1e-5, atol=1e-6, err_msg=layer)


def test_dropout_is_a_layer_only_where_it_drops():
    """Training mode: DROPOUT layers (FlexFlow's dropout, its own random masks) and attention
    dropout at the configured rate; evaluation mode: neither."""
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=2 * SEQ, n_embd=WIDTH, n_layer=1, n_head=HEADS,
        bos_token_id=0, eos_token_id=0, use_cache=False, attn_implementation="sdpa"))
    translator = PyTorchModel(model, is_hf_model=True, batch_size=BATCH, seq_length=SEQ)

    def rates():
        fields = [line.split("; ") for line in translator.torch_to_string()]
        return sorted(f[4] for f in fields if f[3:4] in (["DROPOUT"],
                                                          ["SCALED_DOT_PRODUCT_ATTENTION"]))
    assert rates() == ["0.1"] * 4
    model.eval()
    assert rates() == ["0.0"]


class TwiceAfterABranch(nn.Module):
    """A Linear called twice and a parameter read twice, past a branch torch.fx cannot trace."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 6))

    def forward(self, x):
        if x.dim() == 2:
            x = x * self.scale
        return self.fc(torch.tanh(self.fc(x))) * self.scale


def test_weights_read_twice_train_as_one():
    torch.manual_seed(0)
    model = TwiceAfterABranch()
    data = training.batches(lambda s: models.float_inputs((8, 6), seed=s), 8, 6, steps=5)
    ours, _ = training.ff_losses(model, data, 0.1, probabilities=False)
    theirs = training.torch_losses(model, data, 0.1, probabilities=False)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)


# ---- what cannot be translated ------------------------------------------------------------------
class Branching(nn.Module):
    """torch.fx cannot branch on a traced value; torch.export records the branch taken, with
    three ops the front end has no translation for."""

    def forward(self, x):
        if x.dim() == 2:
            x = x * 2
        return torch.cumsum(x, 0) + torch.sin(x) + torch.sort(x).values


def test_untranslatable_aten_ops_are_named_at_once():
    ff, tensors = ff_model([np.zeros((2, 3), np.float32)])
    with pytest.raises(ConversionError) as caught:
        PyTorchModel(Branching()).torch_to_ff(ff, tensors)
    message = str(caught.value)
    for op in ("aten.cumsum", "aten.sin", "aten.sort"):
        assert op in message
    assert "test_hf_models.py" in message  # the source line


def test_a_file_needs_example_inputs_where_torch_fx_fails(tmp_path):
    with pytest.raises(ConversionError, match="example_inputs"):
        PyTorchModel(Branching()).torch_to_file(tmp_path / "model.ff")
    PyTorchModel(Branching(), example_inputs=(torch.zeros(2, 3),))  # accepted; translated later


class MaskedAttention(nn.Module):
    """Attention under a mask given as an input, past a branch torch.fx cannot trace."""

    def forward(self, x, mask):
        if x.dim() == 4:
            x = x * 2
        return F.scaled_dot_product_attention(x, x, x, attn_mask=mask)


def test_a_mask_from_the_inputs_is_added_if_float_and_keeps_scores_if_bool():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 5, 4)).astype(np.float32)
    keep = (rng.random((2, 1, 5, 5)) < 0.7) | np.eye(5, dtype=bool)
    for mask in (np.where(keep, 0.0, -1e9).astype(np.float32), keep):
        assert_outputs_match(ff_outputs(MaskedAttention(), [x, mask]),
                             torch_outputs(MaskedAttention(), [x, mask]))


def test_the_padding_row_of_an_embedding_is_named():
    ff, tensors = ff_model([tokens()])
    with pytest.warns(TorchImportWarning, match="padding_idx 0"):
        build(make("bert", "sdpa"), ff, tensors, "hf")
