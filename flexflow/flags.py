"""FlexFlow's command-line flags: the table (every flag of r22.07's `FFConfig::parse_args` with
its default, and ours), and the parser FFConfig reads the command line with.

A flag's value follows it (`-b 32`) or is joined to it with `=` (`-b=32`, `--lr=0.1`). Unknown
arguments pass through, since scripts add their own flags and parse them with argparse, but one
that looks like a misspelt FlexFlow flag (`--epoch`, `--batch_size`, `-ll:gpus`) gets one
`FlagWarning` naming the flag it resembles. A known flag with a malformed value (`-b abc`) is a
`FlagError` that names the flag. `--help` and `--version` print and exit (`help_text`).
"""

from __future__ import annotations

import difflib
import math
import textwrap
import warnings
from dataclasses import dataclass
from typing import Callable, Sequence


class FlagError(ValueError):
    """A command-line flag had a value of the wrong form."""


class FlagWarning(UserWarning):
    """An unknown argument resembles a FlexFlow flag (a typo, most likely)."""


@dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]
    field: str
    parse: Callable[[str], object] | None  # None: a switch that takes no value
    default: object
    help: str


def _checked(kind: str, parse: Callable[[str], float], ok: Callable[[float], bool], rule: str):
    """A value parser, called `kind` in error messages, that refuses a value breaking `rule`."""
    def parsed(text: str):
        value = parse(text)
        if not ok(value):
            raise ValueError(rule)
        return value
    parsed.__name__ = kind
    return parsed


_positive_int = _checked("positive_int", int, lambda v: v > 0, "must be positive")
_non_negative_int = _checked("non_negative_int", int, lambda v: v >= 0, "must not be negative")
_finite_float = _checked("finite_float", float, math.isfinite, "must be finite")
_learning_rate = _checked("learning_rate", _finite_float, lambda v: v >= 0, "must be >= 0")


COLLECTIVES = ("auto", "on", "off")
CUDA_GRAPHS = ("auto", "off")


def _interval(text: str):
    """A count of updates (an int >= 0), or "auto"."""
    return text if text == "auto" else _non_negative_int(text)


def _choice(kind: str, choices: Sequence[str]):
    """A value parser accepting one of `choices`."""
    return _checked(kind, str, lambda v: v in choices, f"must be one of {', '.join(choices)}")


def _size_mb(text: str) -> int:
    """Realm sizes are megabytes, optionally with a unit suffix (`-ll:fsize 14g`)."""
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    if text and text[-1].lower() in units:
        value = _finite_float(text[:-1]) * units[text[-1].lower()]
        if not 0 <= value < math.inf:
            raise ValueError("must be a finite size, not negative")
        return int(value)
    return _non_negative_int(text)


F = Flag
HELP_WIDTH = 96  # columns of --help's lines
FLAGS = (
    F(("-e", "--epochs"), "epochs", _positive_int, 1, "epochs (scripts pass it to fit)"),
    F(("-b", "--batch-size"), "batch_size", _positive_int, 64,
      "global batch size, all devices together"),
    F(("--lr", "--learning-rate"), "learning_rate", _learning_rate, 0.01,
      "learning rate (FlexFlow's optimizers take their own)"),
    F(("--wd", "--weight-decay"), "weight_decay", _finite_float, 0.0001,
      "weight decay (FlexFlow's optimizers take their own)"),
    F(("-p", "--print-freq"), "print_freq", int, 10, "print frequency"),
    F(("-d", "--dataset"), "dataset_path", str, "", "data set path (empty: synthetic data)"),
    F(("--budget", "--search-budget"), "search_budget", _non_negative_int, 0,
      "strategy search iterations; > 0 searches at compile"),
    F(("--alpha", "--search-alpha"), "search_alpha", _finite_float, 1.0,
      "the search's temperature factor"),
    F(("--simulator-workspace-size",), "simulator_workspace_size", _non_negative_int, 2 << 30,
      "bytes of workspace for measuring operator costs"),
    F(("--import", "--import-strategy"), "import_strategy_file", str, "",
      "strategy file to run with"),
    F(("--export", "--export-strategy"), "export_strategy_file", str, "",
      "write the strategy the run uses to this file"),
    F(("--enable-parameter-parallel",), "enable_parameter_parallel", None, False,
      "the search may split layers' weights"),
    F(("--enable-attribute-parallel",), "enable_attribute_parallel", None, False,
      "the search may split layers' other dims"),
    F(("--enable-sample-parallel",), "enable_sample_parallel", None, True,
      "the search may split the batch"),
    F(("--enable-recomputation",), "enable_recomputation", None, False,
      "the search may recompute layers' forward in backward (ours)"),
    F(("--enable-weight-sharding",), "enable_weight_sharding", None, False,
      "the search may shard layers' weights over their holders between uses (ours)"),
    F(("--enable-pipeline-parallel",), "enable_pipeline_parallel", None, False,
      "the search may run stages of layers on their own devices in micro-batches (ours)"),
    F(("--search-processes",), "search_processes", _positive_int, 1,
      "processes scoring the search's proposals at once, forked (ours)"),
    F(("-ll:gpu",), "workers_per_node", _positive_int, 0, "devices per node"),
    F(("-ll:cpu",), "cpus_per_node", _non_negative_int, 0, "CPUs per node"),
    F(("-ll:fsize",), "device_memory_mb", _size_mb, 0, "MB of memory per GPU"),
    F(("-ll:zsize",), "zero_copy_memory_mb", _size_mb, 0, "MB of zero-copy memory per node"),
    F(("-ll:util",), "utility_threads", _non_negative_int, 1, "utility threads (Legion's)"),
    F(("-ll:bgwork",), "background_threads", _non_negative_int, 1,
      "background threads (Legion's)"),
    F(("--nodes",), "num_nodes", _positive_int, 1, "nodes"),
    F(("--profiling",), "profiling", None, False, "print each operator's kernel times"),
    F(("--allow-tensor-op-math-conversion",), "allow_tensor_op_math_conversion", None, False,
      "tensor-op math (TF32/FP16) in cuBLAS and cuDNN"),
    F(("--fusion",), "perform_fusion", None, False, "fuse operators with the same placement"),
    F(("--overlap",), "search_overlap_backward_update", None, False,
      "the simulator overlaps backward and the update"),
    F(("--taskgraph",), "export_strategy_task_graph_file", str, "",
      "write the simulated task graph as Graphviz DOT"),
    F(("--machine-model-version",), "machine_model_version", _non_negative_int, 0,
      "0: simple machine model, 1: from --machine-model-file"),
    F(("--machine-model-file",), "machine_model_file", str, "", "machine description file"),
    F(("--simulator-segment-size",), "simulator_segment_size", _positive_int, 16777216,
      "bytes a simulated message is cut into"),
    F(("--simulator-max-num-segments",), "simulator_max_num_segments", _positive_int, 1,
      "segments per simulated message at the most"),
    F(("--enable-propagation",), "enable_propagation", None, False,
      "search proposals may change a layer's neighbours too"),
    F(("--disable-control-replication",), "disable_control_replication", None, False,
      "no control replication (Legion's)"),
    F(("--python-data-loader-type",), "python_data_loader_type", _positive_int, 2,
      "1: attached arrays, 2: array loaders"),
    F(("-i", "--iterations"), "iterations", _positive_int, 1, "iterations (r20.12)"),
    F(("--scheduler",), "scheduler_address", str, "", "Dask scheduler to run on (ours)"),
    F(("--tls-ca-file",), "tls_ca_file", str, "", "TLS CA file for the scheduler (ours)"),
    F(("--tls-cert",), "tls_cert", str, "", "TLS certificate for the scheduler (ours)"),
    F(("--tls-key",), "tls_key", str, "", "TLS key for the scheduler (ours)"),
    F(("--in-process",), "in_process", None, False,
      "the devices in this process, no cluster (ours)"),
    F(("--cluster",), "force_cluster", None, False, "a local cluster even for one device (ours)"),
    F(("--plain-cluster",), "plain_cluster", None, False,
      "the local cluster -ll:gpu N starts uses plain TCP, not TLS (ours)"),
    F(("--cpu",), "cpu_only", None, False, "NumPy only, even with a GPU (ours)"),
    F(("--seed",), "seed", _non_negative_int, 0, "seed of initializers and dropout (ours)"),
    F(("--allow-nonfinite",), "allow_nonfinite", None, False,
      "train on when a loss or gradient is NaN or Inf (ours)"),
    F(("--per-partition-batch-norm",), "per_partition_batch_norm", None, False,
      "batch norm statistics per sample partition, as FlexFlow and DDP take them, not the "
      "whole batch's; the running ones are the first partition's, as DDP's rank 0's (ours)"),
    F(("--recovery-interval",), "recovery_interval", _interval, "auto",
      "updates between copies kept to survive a lost worker, 0: none, auto: at least 10, "
      "and as many as keep the copies to 2% of the training time (ours)"),
    F(("--profile",), "profile_file", str, "", "write Dask's performance report (ours)"),
    F(("--timeline",), "timeline_file", str, "", "draw the simulated timeline (ours)"),
    F(("--search-plot",), "search_plot_file", str, "", "draw the search's progress (ours)"),
    F(("--collectives",), "collectives", _choice("collectives", COLLECTIVES), "auto",
      "sum replicated weights' gradients with torch.distributed all-reduces: auto (on a "
      "cluster with torch, but a tls:// --scheduler), on or off (ours)"),
    F(("--cuda-graphs",), "cuda_graphs", _choice("cuda-graphs", CUDA_GRAPHS), "auto",
      "replay a one-GPU step as a CUDA graph: auto (where the step can be replayed, checked "
      "against a plain step once) or off (ours)"),
    F(("--bucket-size",), "bucket_size_mb", _positive_int, 25,
      "MB of gradients per all-reduce bucket, as DDP's bucket_cap_mb (ours)"),
)
BY_NAME = {name: flag for flag in FLAGS for name in flag.names}

# Arguments that are not FFConfig's but are known: Legion's and Realm's, and the flags of
# FlexFlow's example scripts and DLRM: never taken for misspellings
OTHERS = frozenset((
    "-ll:py", "-ll:pin", "-ll:csize", "-ll:rsize", "-ll:nsize", "-ll:msize", "-ll:ncsize",
    "-ll:dma", "-ll:ahandlers", "-ll:force_kthreads", "-ll:ht_sharing", "-ll:onumamem",
    "-ll:show_rsrv", "-ll:streams", "-lg:prof", "-lg:spy", "-level", "-logfile", "--nocr",
    "-a", "--test_acc", "--test_type", "--seq-length", "--num-heads", "--hidden-size",
    "--num_layers", "--num-layers", "--embedding-size", "--sequence-length", "--dense-layers",
    "--dense-feature-layers", "--arch-sparse-feature-size", "--arch-embedding-size",
    "--embedding-bag-size", "--arch-mlp-bot", "--arch-mlp-top", "--loss-threshold",
    "--sigmoid-top", "--sigmoid-bot", "--arch-interaction-op", "--data-size",
    "--control-replication", "--log-instance-creation", "--strategy", "--help", "--version"))
_WARNED: set[str] = set()


def _int_list(text: str) -> list[int]:
    """DLRM's layer lists, `a-b-c`."""
    return [int(v) for v in text.split("-")]


# FlexFlow's DLRMConfig (its DLRM example's flags and defaults)
DLRM_FLAGS = (
    F(("--arch-sparse-feature-size",), "sparse_feature_size", int, 2, "embedding width"),
    F(("--arch-embedding-size",), "embedding_size", _int_list, (4,),
      "vocabulary of each sparse feature, a-b-c"),
    F(("--embedding-bag-size",), "embedding_bag_size", int, 1, "indices per embedding bag"),
    F(("--arch-mlp-bot",), "mlp_bot", _int_list, (4, 2), "bottom MLP widths, a-b"),
    F(("--arch-mlp-top",), "mlp_top", _int_list, (8, 2), "top MLP widths, a-b"),
    F(("--loss-threshold",), "loss_threshold", _finite_float, 0.0, "stop below this loss"),
    F(("--sigmoid-top",), "sigmoid_top", int, -1, "top MLP layer with a sigmoid, -1: none"),
    F(("--sigmoid-bot",), "sigmoid_bot", int, -1, "bottom MLP layer with a sigmoid, -1: none"),
    F(("--arch-interaction-op",), "arch_interaction_op", str, "cat", "cat or dot"),
    F(("--dataset",), "dataset_path", str, "", "data set path"),
    F(("--data-size",), "data_size", int, -1, "samples, -1: all"),
)


def parse_flags(argv: Sequence[str], table: Sequence[Flag] = FLAGS) -> dict[str, object]:
    """Values of the flags of `table` (FFConfig's) in `argv`; other arguments are skipped
    (with a warning, for FFConfig's table, for those that resemble one of its flags)."""
    by_name = BY_NAME if table is FLAGS else {n: flag for flag in table for n in flag.names}
    values: dict[str, object] = {}
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        name, joined, text = token.partition("=") if token.startswith("-") else (token, "", "")
        flag = by_name.get(name)
        if flag is None:
            if table is FLAGS:
                _warn_if_misspelt(name)
            continue
        if flag.parse is None:
            if joined:
                raise FlagError(f"flag {name} is a switch and takes no value, got {token!r}")
            values[flag.field] = True
            continue
        if not joined:
            if i >= len(tokens):
                raise FlagError(f"flag {token} needs a value")
            text = tokens[i]
            i += 1
        values[flag.field] = _value(flag, name, text)
    return values


def _value(flag: Flag, name: str, text: str):
    try:
        return flag.parse(text)
    except ValueError as error:
        kind = getattr(flag.parse, "__name__", "value").lstrip("_").replace("_", " ")
        raise FlagError(f"flag {name}: {text!r} is not a valid {kind} ({error})") from None


def resembled(name: str) -> str | None:
    """The known flag an unknown argument `name` resembles, if any."""
    if not name.startswith("-") or name in OTHERS or _is_number(name):
        return None
    spelt = name.replace("_", "-").lower()
    if spelt in BY_NAME:
        return spelt
    close = difflib.get_close_matches(spelt, list(BY_NAME), n=1, cutoff=0.8)
    return close[0] if close else None


def _warn_if_misspelt(name: str) -> None:
    known = resembled(name)
    if known is not None and name not in _WARNED:
        _WARNED.add(name)
        warnings.warn(FlagWarning(f"unknown argument {name!r} is passed on to the script; did "
                                  f"you mean {known}?"), stacklevel=4)


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def help_text() -> str:
    """What `--help` prints: every flag, its value and default, what it does."""
    lines = ["FlexFlow's flags (flexflow-dask reads every flag of FlexFlow r22.07; those marked",
             "'ours' are flexflow-dask's). A value follows its flag (-b 32) or is joined to it",
             "(-b=32). Other arguments are passed on to the script.", ""]
    for flag in FLAGS:
        names = ", ".join(flag.names)
        value = "" if flag.parse is None else " " + flag.field.split("_")[-1].upper()
        default = "" if flag.parse is None else f" (default {flag.default!r})"
        lines.append(f"  {names}{value}")
        lines += textwrap.wrap(f"{flag.help}{default}", HELP_WIDTH, initial_indent=" " * 6,
                               subsequent_indent=" " * 6)
    return "\n".join(lines)
