"""Peak memory of one GPT-2-medium training step on one device at 2 sequences of 1,024 tokens
(global batch 32 over 16 devices, the issue's data-parallel share), Adam, each system in a
process of its own: is data parallelism over a 16 GB device's memory?

Systems, measured as bench/memory.py measures (the growth of the process's peak resident
memory from after its imports to the end of the step):

    flexflow        bench/dnn.py's gpt2_medium trained by flexflow-dask on one device; beside
                    it our peak allocated bytes (`--profiling`) and the memory model's figure,
                    the one the search and compile's memory check use
    torch_twin      the same network in PyTorch (bench/torch_twins.py's transformer_lm at
                    GPT-2 medium's sizes: nn.MultiheadAttention, whose training path without
                    weights runs the fused scaled-dot-product attention)
    hf_eager        GPT-2 medium as users bring it: transformers' GPT2LMHeadModel (pre-norm,
                    causal, tied embeddings, dropout 0.1 on the attention weights, the residuals
                    and the embeddings), its eager attention, which keeps the attention weights
    hf_sdpa         the same with transformers' default attention, PyTorch's fused
                    scaled_dot_product_attention
    hf_plain        hf_sdpa without dropout and with PyTorch's GELU (one kernel) in place of
                    GPT-2's tanh approximation (`gelu_new`: elementwise operations of which
                    autograd keeps three results besides the input): the layers ours and the
                    twin train, in GPT-2's order

    python bench/gpt2_memory.py [--systems flexflow hf_eager ...] [--batch 2] [--threads 2]

A step takes minutes on this machine's CPUs; each system runs once (its peak moves by a few
percent from run to run, far less than a time does).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import memory
from child_processes import end_groups_on_sigterm, run_child

SYSTEMS = ("flexflow", "torch_twin", "hf_eager", "hf_sdpa", "hf_plain")
SEQ, VOCAB, WIDTH, HEADS, LAYERS = 1024, 50257, 1024, 16, 24
GIB = 1 << 30
DEVICE_MEMORY = 16 << 30  # p100-4x4's devices (scheduler/machine.py's P100)


def tokens(batch: int):
    """(inputs, next tokens) of one synthetic batch, from one seed."""
    import numpy as np
    rng = np.random.default_rng(0)
    return (rng.integers(0, VOCAB, (batch, SEQ)).astype(np.int32),
            rng.integers(0, VOCAB, (batch, SEQ, 1)).astype(np.int32))


def flexflow_steps(batch: int, steps: int) -> dict:
    """Our steps' figures: the memory model's and the allocated peak (bytes)."""
    import dnn

    from flexflow.core import AdamOptimizer, FFConfig, FFModel, LossType, MetricsType
    ff = FFModel(FFConfig(argv=["--profiling"], batch_size=batch))
    (x,) = dnn.gpt2_medium(ff, batch)
    ff.compile(optimizer=AdamOptimizer(ff, alpha=1e-4),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY])
    xb, yb = tokens(batch)
    x.set_tensor(ff, xb)
    ff.label_tensor.set_tensor(ff, yb)
    for _ in range(steps):
        ff.train_step()
    return {"predicted": memory.memory_model(ff),
            "allocated": ff.get_perf_metrics().peak_memory[0]}


def torch_network(system: str):
    import torch
    if system == "torch_twin":
        import torch_twins
        return torch_twins.module("transformer_lm", vocab=VOCAB, width=WIDTH, heads=HEADS,
                                  layers=LAYERS)
    from transformers import GPT2Config, GPT2LMHeadModel
    plain = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
             "activation_function": "gelu"} if system == "hf_plain" else {}
    config = GPT2Config(n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS, n_positions=SEQ,
                        vocab_size=VOCAB,
                        attn_implementation="eager" if system == "hf_eager" else "sdpa", **plain)
    net = GPT2LMHeadModel(config)
    net.train()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(input_ids=x).logits
    return Logits()


def torch_steps(system: str, batch: int, steps: int) -> dict:
    import torch
    net = torch_network(system)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
    xb, yb = tokens(batch)
    x, y = torch.from_numpy(xb).long(), torch.from_numpy(yb).long().reshape(-1)
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(net(x).reshape(y.shape[0], -1), y).backward()
        optimizer.step()
    return {}


def child(system: str, batch: int, steps: int, threads: int) -> dict:
    if system == "flexflow":  # as a FlexFlow script imports it: before PyTorch loads
        import flexflow.core  # noqa: F401
    import torch
    if system.startswith("hf"):
        import transformers  # noqa: F401
    torch.set_num_threads(threads)
    start = memory.start_peak()
    figures = (flexflow_steps(batch, steps) if system == "flexflow"
               else torch_steps(system, batch, steps))
    figures["peak"] = memory.peak_since(start)
    return figures


def measured(system: str, batch: int, steps: int, threads: int) -> dict:
    """The figures of `system`'s child process (`child_processes.run_child`: nothing it starts
    outlives it)."""
    output = run_child([sys.executable, __file__, "--child", system, "--batch", str(batch),
                        "--steps", str(steps), "--threads", str(threads)], dict(os.environ))
    return json.loads([line for line in output.splitlines() if line.startswith("{")][-1])


def report(system: str, figures: dict, seconds: float) -> None:
    peak = figures["peak"]
    line = (f"{system:10s} resident peak growth {peak / GIB:6.2f} GiB "
            f"({'over' if peak > DEVICE_MEMORY else 'under'} 16 GiB)")
    if "predicted" in figures:
        line += (f" | allocated {figures['allocated'] / GIB:6.2f} GiB, memory model "
                 f"{figures['predicted'] / GIB:6.2f} GiB")
    print(f"{line} ({seconds:.0f} s)", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--batch", type=int, default=2, help="sequences on the one device")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.batch, args.steps, args.threads)))
        return
    from host_load import StealMeter, describe
    end_groups_on_sigterm()
    print(f"GPT-2 medium, {args.steps} Adam training steps of {args.batch} x {SEQ} tokens on one "
          f"device", flush=True)
    steal = StealMeter()
    for system in args.systems:
        started = time.perf_counter()
        report(system, measured(system, args.batch, args.steps, args.threads),
               time.perf_counter() - started)
    print(f"({describe(steal.read())})")


if __name__ == "__main__":
    main()
