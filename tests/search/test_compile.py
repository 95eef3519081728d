"""The search through FFModel.compile: flags, printed block, --export / --taskgraph, training
with the searched strategy in the same run, the calibration cache, and strategies that cannot
run reported before any work."""

import os
import re

import pytest

from flexflow.core import ActiMode, FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.scheduler import strategy_file
from flexflow.scheduler.calibration import LocalRunner
from flexflow.scheduler.machine import MachineError
from flexflow.scheduler.search import BEST_FOOTER, BEST_HEADER
from flexflow.scheduler.strategy import ParallelConfig, StrategyError

from ..parallel.models import mlp
from ..parallel.test_strategy_invariance import assert_same_run, reference, train


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEXFLOW_DASK_CACHE", str(tmp_path / "cache"))


def searched(tmp_path, extra=()):
    return ["--in-process", "-ll:gpu", "2", "--budget", "40", "--enable-parameter-parallel",
            "--export", str(tmp_path / "best.txt"), "--taskgraph",
            str(tmp_path / "best.dot"), *extra]


def test_search_then_train_with_the_best_strategy(tmp_path, capsys):
    run = train(mlp, searched(tmp_path))
    out = capsys.readouterr().out
    assert "MCMC search configuration: budget(40) alpha(1.00000000) mode(TRAINING)" in out
    assert re.search(r"Calibration: .* kernel shapes, \d+ measured, 0 from the cache", out)
    block = out[out.index(BEST_HEADER):out.index(BEST_FOOTER)].splitlines()[1:]
    assert [line.split("]")[0] for line in block] == [
        "[Dense_100", "[Dense_101", "[ReLU_102", "[Dense_103", "[Softmax_104"]
    assert out.index(BEST_FOOTER) < out.index("Compiled ffmodel!")
    exported = strategy_file.read(str(tmp_path / "best.txt"))
    for line in block:  # the printed block is the exported strategy, dims reversed
        name, dims = re.match(r"\[(\S+)\] num_dims\(\d\) dims\[([\d,]+)\]", line).groups()
        assert tuple(int(d) for d in reversed(dims.split(","))) == exported[name].degrees
    dot = (tmp_path / "best.dot").read_text()
    assert dot.startswith("digraph taskgraph {") and "Dense_100-forward-0 | Forward" in dot
    assert_same_run(run, reference("mlp"))  # trained with it: same numbers as one device


def test_second_run_calibrates_nothing(tmp_path, capsys):
    train(mlp, searched(tmp_path))
    capsys.readouterr()
    train(mlp, searched(tmp_path))
    assert re.search(r"kernel shapes, 0 measured, \d+ from the cache", capsys.readouterr().out)


def dense_model(ff):
    x = ff.create_tensor([64, 784])
    t = ff.dense(x, 512, ActiMode.AC_MODE_RELU)
    ff.softmax(ff.dense(t, 10))


def compile_with(argv):
    ff = FFModel(FFConfig(argv=argv, batch_size=64))
    dense_model(ff)
    ff.compile(optimizer=SGDOptimizer(ff, 0.01, 0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff


@pytest.mark.parametrize("search", [[], ["--budget", "5"]])
def test_imported_strategy_over_memory_is_reported(tmp_path, monkeypatch, search):
    path = tmp_path / "dp.txt"
    compile_with(["--in-process", "-ll:gpu", "2", "--export", str(path)])
    argv = ["--in-process", "-ll:gpu", "2", "-ll:fsize", "1", "--import", str(path), *search]
    compile_with(argv)  # on CPU devices -ll:fsize (a GPU's memory) does not apply
    monkeypatch.setattr(LocalRunner, "on_gpus", lambda self: True)
    with pytest.raises(StrategyError, match=r"does not fit in device memory: device 0 needs "
                                            r"\d+\.\d MB, has 1\.0 MB"):
        compile_with(argv)


def test_imported_strategy_on_missing_devices_is_reported(tmp_path):
    path = tmp_path / "dp.txt"
    ff = compile_with(["--in-process", "-ll:gpu", "2", "--export", str(path)])
    strategy_file.save({**ff.strategy, "Dense_100": ParallelConfig((2, 1), (0, 7))}, str(path))
    with pytest.raises(StrategyError, match=r"Dense_100.*device ids \[7\] do not exist "
                                            r"\(2 devices\)"):
        compile_with(["--in-process", "-ll:gpu", "2", "--import", str(path), "--budget", "5"])


def test_machine_model_that_does_not_match_the_run_is_reported(tmp_path):
    with pytest.raises(MachineError, match=r"has 16 devices but this run has 2"):
        compile_with(["--in-process", "-ll:gpu", "2", "--budget", "5",
                      "--machine-model-file", "p100-4x4"])
    with pytest.raises(MachineError, match=r"--machine-model-version 1 needs"):
        compile_with(["--in-process", "--budget", "5", "--machine-model-version", "1"])


OUTPUT_FLAGS = {"--export": "best.txt", "--taskgraph": "best.dot", "--timeline": "best.png",
                "--search-plot": "best.png"}


def cannot_be_written(tmp_path, name: str, where: str):
    """An output path that cannot be written, and what the error says of it."""
    if where == "missing folder":
        return tmp_path / "no such folder" / name, f"folder {tmp_path / 'no such folder'} does " \
                                                   f"not exist"
    if where == "under a file":
        (tmp_path / "a file").write_text("")
        return tmp_path / "a file" / name, f"{tmp_path / 'a file'} is not a folder"
    if where == "a folder":
        (tmp_path / name).mkdir()
        return tmp_path / name, "is a folder"
    if where == "read-only folder":
        read_only = tmp_path / "read-only"
        read_only.mkdir(mode=0o500)
        path, said = read_only / name, f"folder {read_only} is not writable"
    else:
        read_only = path = tmp_path / name
        read_only.write_text("")
        read_only.chmod(0o400)
        said = "the file exists and is not writable"
    if os.access(read_only, os.W_OK):
        pytest.skip("this process writes into read-only folders and files (root)")
    return path, said


@pytest.mark.parametrize("where", ["missing folder", "under a file", "a folder",
                                   "read-only folder", "read-only file"])
@pytest.mark.parametrize("flag", sorted(OUTPUT_FLAGS))
def test_an_output_file_that_cannot_be_written_is_refused_before_the_search(
        flag, where, tmp_path, monkeypatch):
    """The files written once the search is done (--export, --taskgraph, the pictures) are
    checked at compile, before the calibration and the search (a million proposals here)."""
    from flexflow.core import FlagError
    from flexflow.scheduler import planner

    def too_late(*args, **keywords):
        raise AssertionError("the calibration or the search ran before the paths were checked")
    monkeypatch.setattr(planner, "calibrate", too_late)
    monkeypatch.setattr(planner.Planner, "search", too_late)
    path, said = cannot_be_written(tmp_path, OUTPUT_FLAGS[flag], where)
    with pytest.raises(FlagError) as error:
        compile_with(["--in-process", "-ll:gpu", "2", "--budget", "1000000", flag, str(path)])
    assert str(error.value).startswith(f"{flag} {path}: ") and said in str(error.value)


def test_a_profile_report_that_cannot_be_written_is_refused_before_the_cluster_starts(
        tmp_path, monkeypatch):
    pytest.importorskip("bokeh")
    from flexflow import deployment
    from flexflow.core import FlagError

    def too_late(config):
        raise AssertionError("a cluster started before --profile's path was checked")
    monkeypatch.setattr(deployment, "start_cluster", too_late)
    (tmp_path / "report.html").mkdir()
    with pytest.raises(FlagError, match=f"--profile {tmp_path / 'report.html'}: .*is a folder"):
        compile_with(["-ll:gpu", "2", "--profile", str(tmp_path / "report.html")])
