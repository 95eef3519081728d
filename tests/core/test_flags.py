"""Flags as people type them (flexflow/flags.py): values joined with `=`, one warning for an
argument that resembles a FlexFlow flag, and `--help` / `--version` that print and exit."""

import re
import warnings

import pytest

from flexflow import flags
from flexflow.core import FFConfig, FlagError
from flexflow.flags import FlagWarning

from ..launcher.run import TINY_MLP, launch


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(flags, "_WARNED", set())


def parsed(argv):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = FFConfig(argv=argv)
    return config, [str(w.message) for w in caught if issubclass(w.category, FlagWarning)]


def test_values_joined_with_an_equals_sign_are_read():
    config, warned = parsed(["--lr=0.1", "-b=32", "--epochs=3", "-ll:gpu=2", "--seed=7"])
    assert (config.learning_rate, config.batch_size, config.epochs) == (0.1, 32, 3)
    assert (config.workers_per_node, config.seed) == (2, 7) and warned == []


@pytest.mark.parametrize("argv, message", [(["-b="], "-b"), (["--epochs=zero"], "--epochs"),
                                           (["--profiling=yes"], "takes no value")])
def test_a_bad_joined_value_names_the_flag(argv, message):
    with pytest.raises(FlagError, match=message):
        FFConfig(argv=argv)


@pytest.mark.parametrize("typed, meant", [("--budjet", "--budget"), ("--epoch", "--epochs"),
                                          ("--batch_size", "--batch-size"),
                                          ("-ll:gpus", "-ll:gpu"), ("--Epochs", "--epochs"),
                                          ("--learning_rate", "--learning-rate")])
def test_an_argument_like_a_flag_gets_one_warning_naming_it(typed, meant):
    config, warned = parsed([typed, "5", "--budget", "3", typed, "5"])
    assert len(warned) == 1 and repr(typed) in warned[0] and warned[0].endswith(f"{meant}?")
    assert config.search_budget == 3  # nothing else changes: the argument passes through
    assert parsed([typed, "5"])[1] == []  # once per process


@pytest.mark.parametrize("argv", [["-ll:py", "1"], ["--test_acc"], ["-a"], ["--num-samples", "9"],
                                  ["--seq-length", "64", "--num-heads", "4"], ["-0.5"],
                                  ["--my-script-flag", "x"], ["--arch-mlp-bot", "4-2"]])
def test_script_and_runtime_arguments_pass_without_a_warning(argv):
    assert parsed(argv)[1] == []


def test_help_lists_every_flag_and_exits(capsys):
    with pytest.raises(SystemExit) as exited:
        FFConfig(argv=["-b", "8", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    listed = set(re.findall(r"(?<![\w-])(--?[\w:-]+)", text))
    assert {name for flag in flags.FLAGS for name in flag.names} <= listed
    assert "(default 64)" in text


def test_version_prints_and_exits(capsys):
    with pytest.raises(SystemExit):
        FFConfig(argv=["--version"])
    assert capsys.readouterr().out.startswith("flexflow-dask ")


@pytest.mark.parametrize("launcher", [True, False])
def test_help_of_a_script_prints_the_flags_instead_of_training(launcher):
    result = launch(TINY_MLP, "--help", launcher=launcher)
    assert "--batch-size" in result.stdout and "-ll:gpu" in result.stdout
    assert "step 0 loss" not in result.stdout  # no training step ran


def test_flexflow_python_help_and_version_without_a_script():
    assert "usage: flexflow_python" in launch("--help").stdout
    assert launch("--version").stdout.startswith("flexflow-dask ")


def test_dlrm_config_has_flexflow_s_defaults_and_reads_its_flags():
    from flexflow.core import DLRMConfig
    default = DLRMConfig(argv=[])
    assert (default.sparse_feature_size, default.embedding_size, default.embedding_bag_size,
            default.mlp_bot, default.mlp_top, default.sigmoid_bot, default.sigmoid_top,
            default.loss_threshold, default.arch_interaction_op, default.dataset_path) == (
        2, [4], 1, [4, 2], [8, 2], -1, -1, 0.0, "cat", "")
    config = DLRMConfig(argv=["-b", "8", "--arch-sparse-feature-size", "16",
                              "--arch-embedding-size", "1000-2000-3000",
                              "--arch-mlp-bot=64-16", "--arch-mlp-top", "64-32-1",
                              "--sigmoid-top", "2", "--loss-threshold", "0.5",
                              "--arch-interaction-op", "dot", "--dataset", "d.h5"])
    assert (config.sparse_feature_size, config.embedding_size, config.mlp_bot, config.mlp_top,
            config.sigmoid_top, config.loss_threshold, config.arch_interaction_op,
            config.dataset_path) == (16, [1000, 2000, 3000], [64, 16], [64, 32, 1], 2, 0.5,
                                     "dot", "d.h5")
    with pytest.raises(FlagError, match="--arch-mlp-bot"):
        DLRMConfig(argv=["--arch-mlp-bot", "4-x"])


@pytest.mark.parametrize("argv, printed", [([], 10), (["-p", "3"], 4), (["--print-freq=20"], 1)])
def test_print_freq_spaces_a_fit_s_metrics_lines(capsys, argv, printed):
    import numpy as np
    from flexflow.core import ActiMode, DataType, FFModel, LossType, SGDOptimizer
    ff = FFModel(FFConfig(argv=argv, batch_size=4))
    x = ff.create_tensor([4, 6], DataType.DT_FLOAT)
    ff.softmax(ff.dense(ff.dense(x, 8, ActiMode.AC_MODE_RELU), 3))
    ff.compile(optimizer=SGDOptimizer(ff, 0.1),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((40, 6)).astype(np.float32)
    ys = rng.integers(0, 3, (40, 1)).astype(np.int32)
    capsys.readouterr()
    ff.fit(x=ff.create_data_loader(x, xs), y=ff.create_data_loader(ff.label_tensor, ys))
    assert capsys.readouterr().err.count("[Metrics]") == printed  # 10 iterations
