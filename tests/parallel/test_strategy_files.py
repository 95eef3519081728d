"""Strategy files: FlexFlow's text format and JSON, exported and imported through the command
line flags, and rejected when they do not fit the model."""

import pytest

from flexflow.core import FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.scheduler import strategy_file
from flexflow.scheduler.strategy import ParallelConfig, StrategyError

from .models import BATCH, MODELS, mlp, strategy

FLEXFLOW_MLP_2GPU = ("4\nDense_100\n0\n2\n1\t2\t\n2\n0\t1\t\nDense_101\n0\n2\n1\t2\t\n2\n0\t1\t\n"
                     "Dense_102\n0\n2\n1\t2\t\n2\n0\t1\t\nSoftmax_103\n0\n2\n1\t2\t\n2\n0\t1\t\n")


def compiled(build, argv, kind=None, n=1):
    ff = FFModel(FFConfig(argv=argv, batch_size=BATCH))
    build(ff)
    ff.compile(optimizer=SGDOptimizer(ff), loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               strategy=None if kind is None else strategy(kind, ff.graph, n))
    return ff


def flexflow_mnist_mlp(ff):
    from flexflow.core import ActiMode
    x = ff.create_tensor([BATCH, 784])
    t = ff.dense(x, 512, ActiMode.AC_MODE_RELU)
    t = ff.dense(t, 512, ActiMode.AC_MODE_RELU)
    ff.softmax(ff.dense(t, 10))


def test_data_parallel_export_is_flexflows_file(tmp_path):
    path = tmp_path / "strategy.txt"
    compiled(flexflow_mnist_mlp, ["-ll:gpu", "2", "--in-process", "--export", str(path)])
    assert path.read_text() == FLEXFLOW_MLP_2GPU


def test_flexflow_file_reads_back_with_reversed_dims():
    loaded = strategy_file.loads_text(FLEXFLOW_MLP_2GPU)
    assert loaded["Dense_100"] == ParallelConfig((2, 1), (0, 1))
    text = strategy_file.dumps_text({"Conv2D_100": ParallelConfig((2, 1, 3, 1), (0, 1, 2, 3, 4, 5))})
    assert text.splitlines()[3:5] == ["4", "1\t3\t1\t2\t"]


@pytest.mark.parametrize("suffix", [".txt", ".json"])
@pytest.mark.parametrize("name", list(MODELS))
def test_export_then_import_reproduces_the_task_graph(tmp_path, name, suffix):
    path = tmp_path / f"strategy{suffix}"
    argv = ["-ll:gpu", "4", "--in-process"]
    exported = compiled(MODELS[name], argv + ["--export", str(path)], "reshard", 4)
    imported = compiled(MODELS[name], argv + ["--import", str(path)])
    assert imported.strategy == exported.strategy
    assert imported.compiled.executor.taskgraph.tasks == exported.compiled.executor.taskgraph.tasks


def test_import_of_another_models_strategy_is_rejected(tmp_path):
    path = tmp_path / "cnn.txt"
    compiled(MODELS["concat_cnn"], ["-ll:gpu", "2", "--in-process", "--export", str(path)])
    with pytest.raises(StrategyError, match=f"{path}.*does not match.*Dense_100"):
        compiled(mlp, ["-ll:gpu", "2", "--in-process", "--import", str(path)])


@pytest.mark.parametrize("edit, message", [
    (lambda s: {**s, "Dense_100": ParallelConfig((3, 1), (0, 1, 2))}, "degree 3 does not divide"),
    (lambda s: {**s, "Dense_100": ParallelConfig((2, 1), (0, 7))}, r"device ids \[7\]"),
    (lambda s: {**s, "Dense_100": ParallelConfig((2, 1, 1), (0, 1))}, "3 dims"),
    (lambda s: {k: v for k, v in s.items() if k != "Dense_101"}, "no configuration.*Dense_101"),
    (lambda s: {**s, "Softmax_104": ParallelConfig((1, 2), (0, 1))}, "only be split along the batch"),
])
def test_strategy_that_does_not_fit_is_reported(tmp_path, edit, message):
    ff = compiled(mlp, ["-ll:gpu", "2", "--in-process"])
    path = tmp_path / "bad.txt"
    strategy_file.save(edit(ff.strategy), str(path))
    with pytest.raises(StrategyError, match=message):
        compiled(mlp, ["-ll:gpu", "2", "--in-process", "--import", str(path)])


@pytest.mark.parametrize("text, message", [
    ("2\nDense_100\n0\n2\n1\t2\t\n2\n0\t1\t\n", "file ends"),
    ("1\nDense_100\n0\n2\nx\t2\t\n2\n0\t1\t\n", "must be an integer"),
    ("1\nDense_100\n0\n2\n1\t2\t\n3\n0\t1\t2\t\n", "2 partitions but 3 device ids"),
    ("2\nA\n0\n1\n1\t\n1\n0\t\nA\n0\n1\n1\t\n1\n0\t\n", "appears twice"),
    ('{"layers": {"A": {"degrees": "x"}}}', "integer lists"),
    ('{"layers": {"A": {"degrees": [1], "devices": [0], "recompute": 1}}}', "true or false"),
    ("{not json", "not valid JSON"),
])
def test_malformed_strategy_files(tmp_path, text, message):
    path = tmp_path / "s.txt"
    path.write_text(text)
    with pytest.raises(StrategyError, match=message):
        strategy_file.read(str(path))


def _recomputing(ff):
    from dataclasses import replace
    return {name: replace(config, recompute=name.startswith("Dense"))
            for name, config in ff.strategy.items()}


def test_a_json_file_keeps_recomputation_and_the_import_runs_it(tmp_path):
    ff = compiled(mlp, ["-ll:gpu", "2", "--in-process"], "sample", 2)
    path = tmp_path / "recomputed.json"
    strategy_file.save(_recomputing(ff), str(path))
    assert strategy_file.read(str(path)) == _recomputing(ff)
    imported = compiled(mlp, ["-ll:gpu", "2", "--in-process", "--import", str(path)])
    backwards = [t.action for t in imported.compiled.executor.taskgraph.tasks
                 if type(t.action).__name__ == "Backward"]
    assert {a.recompute for a in backwards} == {True, False}


def test_flexflows_text_format_warns_that_it_leaves_recomputation_out(tmp_path):
    ff = compiled(mlp, ["-ll:gpu", "2", "--in-process"], "sample", 2)
    path = tmp_path / "recomputed.txt"
    with pytest.warns(UserWarning, match="no recomputation.*Dense_100.*json"):
        strategy_file.save(_recomputing(ff), str(path))
    assert strategy_file.read(str(path)) == ff.strategy


def test_strategy_show_marks_the_recomputed_layers(tmp_path, capsys):
    from flexflow.cli import main
    ff = compiled(mlp, ["-ll:gpu", "2", "--in-process"], "sample", 2)
    path = tmp_path / "recomputed.json"
    strategy_file.save(_recomputing(ff), str(path))
    assert main(["strategy", "show", str(path)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "recomputed" in rows["layer"]
    assert rows["Dense_100"].endswith("yes") and not rows["Softmax_104"].endswith("yes")
