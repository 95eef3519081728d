"""FlexFlow's CI command lines (reference 7.7) through the launcher, on the native examples with
tiny settings (`--num-samples`, small `-b`, an empty `-d` folder so they train on synthetic data):
the runtime flags are accepted, FFConfig sees `-ll:gpu`, and each run trains and exits with 0.
(HEAD's `python script.py -config-file cfg.json` form belongs to an API FlexFlow added after
r22.07, which this project does not target.)"""

import numpy as np

from flexflow.scheduler import strategy_file

from ..examples.runner import METRICS
from .run import EXAMPLES, KERAS_EXAMPLES, launch

# the runtime flags of each script (GPUS=1 unless said)
MULTI_GPU_TESTS = ("-ll:py", "1", "-ll:gpu", "1", "-ll:fsize", "3048", "-ll:zsize", "12192")
PYTHON_TEST_SH = ("-ll:py", "1", "-ll:gpu", "1", "-ll:fsize", "2048", "-ll:zsize", "12192")
INTERFACE_TEST = ("-ll:py", "1", "-ll:gpu", "1", "-ll:fsize", "14048", "-ll:zsize", "12192")


def run(script, *args, data):
    return launch(EXAMPLES / script, *args, "-d", data)


def batches(result) -> list[int]:
    """Samples seen so far at each printed [Metrics] line."""
    return [int(seen) for _, seen in METRICS.findall(result.stderr)]


def test_multi_gpu_tests_line(tmp_path):
    """tests/multi_gpu_tests.sh: flexflow_python <script> <runtime flags> -b GPUS*64 [--epochs N]
    (every native script it lists runs in tests/examples; here the command line matters)."""
    result = run("print_layers.py", *MULTI_GPU_TESTS, "--epochs", "5", "-b", "16",
                 "--num-samples", "32", data=tmp_path)
    assert batches(result)[:10] == [16, 32] * 5


def test_multi_gpu_tests_line_with_two_devices(tmp_path):
    """GPUS=2: a local cluster of two workers (CPU processes standing in for the GPUs)."""
    runtime = ("-ll:py", "1", "-ll:gpu", "2", "-ll:fsize", "3048", "-ll:zsize", "12192")
    result = run("mnist_mlp.py", *runtime, "-b", "32", "--epochs", "2", "--num-samples", "64",
                 data=tmp_path)
    assert "workersPerNode(2)" in result.stdout
    assert "starting 2 CPU worker processes" in result.stdout
    assert batches(result) == [32, 64] * 3  # two epochs of fit, then eval


def test_accuracy_tests_line(tmp_path):
    """tests/accuracy_tests.sh: -a --epochs 5 -b GPUS*64; -a fails the run below 90%."""
    result = run("mnist_mlp.py", *MULTI_GPU_TESTS, "-a", "--epochs", "5", "-b", "64",
                 "--num-samples", "256", data=tmp_path)
    assert "% >= the expected 90%" in result.stdout


def test_python_test_sh_search_export_then_import(tmp_path):
    """python/test.sh: --search-budget B --export-strategy strategy.txt, then a second run with
    --import-strategy strategy.txt trains the same way."""
    common = (*PYTHON_TEST_SH, "--epochs", "1", "-b", "16", "--num-samples", "32")
    exported = launch(EXAMPLES / "mnist_mlp.py", *common, "--search-budget", "10",
                      "--export-strategy", "strategy.txt", "-d", tmp_path, cwd=tmp_path)
    assert "MCMC search: 11/11 (100%)" in exported.stderr  # the search's progress
    strategy = strategy_file.read(str(tmp_path / "strategy.txt"))
    assert sorted(strategy) == ["Dense_100", "Dense_101", "Dense_102", "Softmax_103"]
    imported = launch(EXAMPLES / "mnist_mlp.py", *common, "--import-strategy", "strategy.txt",
                      "-d", tmp_path, cwd=tmp_path)
    assert METRICS.findall(imported.stderr) == METRICS.findall(exported.stderr)


def test_python_test_sh_attach_line(tmp_path):
    result = run("mnist_mlp_attach.py", *PYTHON_TEST_SH, "-b", "16", "--num-samples", "32",
                 data=tmp_path)
    assert "ELAPSED TIME" in result.stdout


def small_mnist(folder) -> dict:
    """A small `mnist.npz` in Keras's layout (random digits) in `folder`; the environment that
    makes the loaders read it (its checksum is not MNIST's), so no download is ever tried."""
    rng = np.random.default_rng(0)
    arrays = {f"x_{part}": rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
              for part, n in (("train", 256), ("test", 64))}
    arrays.update({f"y_{part}": rng.integers(0, 10, n, dtype=np.uint8)
                   for part, n in (("train", 256), ("test", 64))})
    np.savez(folder / "mnist.npz", **arrays)
    return {"FLEXFLOW_DATA_DIR": str(folder), "FLEXFLOW_DATA_VERIFY": "0"}


def test_python_interface_test_line(tmp_path):
    """tests/python_interface_test.sh: flexflow_python keras/seq_mnist_mlp.py -ll:py 1 -ll:gpu 1
    -ll:fsize 14048 -ll:zsize 12192 -b 64 --only-data-parallel (a HEAD flag: data parallelism is
    the default here anyway), on FlexFlow's Keras example (ours), one epoch, no accuracy bar."""
    result = launch(KERAS_EXAMPLES / "seq_mnist_mlp.py", *INTERFACE_TEST, "-b", "64",
                    "--only-data-parallel", "-e", "1", "--accuracy", "0",
                    env=small_mnist(tmp_path))
    assert batches(result) == [256, 64]  # one epoch of fit, then evaluate
    assert "epochs 1, ELAPSED TIME" in result.stdout
