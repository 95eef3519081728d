"""Small Hugging Face transformers (GPT-2, BERT, a Llama decoder) with random weights, exported
to ONNX by torch's two exporters, and the PyTorch runs the ONNX tests compare FlexFlow with.

The models are the transformers classes themselves, built from configs of 2 layers of width 64,
4 heads and a vocabulary of 100, without dropout (the export is of the eval-mode model), so
each exports in seconds. An all-ones attention mask is given to the model: without one,
transformers looks for packed sequences in the position ids with `torch.diff`, which the
legacy exporter cannot write."""

from __future__ import annotations

import contextlib
import copy
import io
import warnings

import numpy as np
import onnx
import torch
from torch import nn
from transformers import (BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                          LlamaForCausalLM)

VOCAB, WIDTH, LAYERS, HEADS = 100, 64, 2, 4
BATCH, SEQ = 4, 8


def gpt2(attention: str) -> nn.Module:
    return GPT2LMHeadModel(GPT2Config(
        n_layer=LAYERS, n_embd=WIDTH, n_head=HEADS, vocab_size=VOCAB, n_positions=2 * SEQ,
        bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        use_cache=False, attn_implementation=attention))


def bert(attention: str) -> nn.Module:
    return BertModel(BertConfig(
        num_hidden_layers=LAYERS, hidden_size=WIDTH, num_attention_heads=HEADS,
        intermediate_size=2 * WIDTH, vocab_size=VOCAB, max_position_embeddings=2 * SEQ,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, use_cache=False,
        attn_implementation=attention), add_pooling_layer=False)


def llama(attention: str) -> nn.Module:
    return LlamaForCausalLM(LlamaConfig(
        num_hidden_layers=LAYERS, hidden_size=WIDTH, num_attention_heads=HEADS,
        num_key_value_heads=HEADS, intermediate_size=2 * WIDTH, vocab_size=VOCAB,
        max_position_embeddings=2 * SEQ, bos_token_id=0, eos_token_id=0, use_cache=False,
        attn_implementation=attention))


# name -> (constructor, whether its output is logits over the vocabulary)
MODELS = {"gpt2": (gpt2, True), "bert": (bert, False), "llama": (llama, True)}


class FirstOutput(nn.Module):
    """The model on token ids alone, with an all-ones mask, returning its first output (the
    logits, or BERT's last hidden state)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, attention_mask=torch.ones_like(ids))[0]


def build(name: str, attention: str) -> FirstOutput:
    """The model with every parameter perturbed, as a trained model's are: a fresh model's
    zero biases and unit norm scales are equal values, which torch's exporters store once (or,
    the current one, drop from a Gemm), so a file of a fresh model no longer has them apart."""
    torch.manual_seed(0)
    model = FirstOutput(MODELS[name][0](attention)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.02 * torch.randn_like(parameter))
    return model


def untied(model: FirstOutput) -> FirstOutput:
    """A copy whose output layer no longer shares its weight with the token embedding (GPT-2
    ties them): what an import that trains a copy of the shared weight in each layer trains."""
    model = copy.deepcopy(model)
    inner = model.model
    head = inner.get_output_embeddings()
    if head is not None and head.weight is inner.get_input_embeddings().weight:
        head.weight = nn.Parameter(head.weight.detach().clone())
    return model


def export(model: nn.Module, dynamo: bool) -> onnx.ModelProto:
    buffer = io.BytesIO()
    example = (token_ids(0),)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if dynamo:
            torch.onnx.export(model, example, buffer, dynamo=True)
        else:
            torch.onnx.export(model, example, buffer, dynamo=False, do_constant_folding=False)
    return onnx.load_from_string(buffer.getvalue())


def token_ids(seed: int) -> torch.Tensor:
    """Ids from 1 on: 0 is BERT's padding token, whose embedding row torch never trains (its
    `padding_idx`), a property of the module that its export does not keep."""
    return torch.tensor(np.random.default_rng(seed).integers(1, VOCAB, (BATCH, SEQ)))


def targets(name: str, step: int) -> np.ndarray:
    """The labels of a training step: next-token classes for the language models (FlexFlow's
    sparse labels, a last dim of 1), a float target of the hidden states for BERT."""
    rng = np.random.default_rng(100 + step)
    if MODELS[name][1]:
        return rng.integers(0, VOCAB, (BATCH, SEQ, 1)).astype(np.int32)
    return rng.standard_normal((BATCH, SEQ, WIDTH)).astype(np.float32)


def torch_loss(name: str, out: torch.Tensor, target: np.ndarray) -> tuple[torch.Tensor, float]:
    """FlexFlow's losses in torch: (what the gradient is of, the loss FlexFlow reports). For
    logits, each position is a sample of the sparse cross-entropy: the gradient is of their sum
    divided by the batch size (FlexFlow scales gradients by 1 / batch), the loss reported their
    mean. For hidden states, the mean squared error."""
    if MODELS[name][1]:
        labels = torch.tensor(target[..., 0], dtype=torch.long)
        loss = nn.functional.cross_entropy(out.reshape(-1, VOCAB), labels.reshape(-1),
                                           reduction="sum") / BATCH
        return loss, loss.item() / SEQ
    loss = nn.functional.mse_loss(out, torch.tensor(target, dtype=out.dtype))
    return loss, loss.item()


def torch_training(name: str, model: nn.Module, lr: float, steps: int,
                   dtype=torch.float32) -> tuple[list[float], nn.Module]:
    """The losses of `steps` SGD steps of a copy of `model` in `dtype`, on the batches
    `token_ids(10 + step)`, and the trained copy."""
    model = copy.deepcopy(model).to(dtype).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        loss, reported = torch_loss(name, model(token_ids(10 + step)), targets(name, step))
        loss.backward()
        optimizer.step()
        losses.append(reported)
    return losses, model.eval()
