"""The PyTorch examples run end to end on tiny settings: each `*_torch.py` script writes its .ff
file and weights in plain Python, and the FlexFlow program that reads it trains and prints
FlexFlow's timing line. They run in this process (runpy) with their own command lines."""

import re
import runpy
import sys

import pytest

from .models import EXAMPLES

ELAPSED = re.compile(r"^epochs 1, ELAPSED TIME = \d+\.\d{4}s, THROUGHPUT = \d+\.\d{2} samples/s$",
                     re.MULTILINE)

pytestmark = pytest.mark.filterwarnings("ignore:Implicit dimension choice for softmax")


@pytest.fixture
def run(tmp_path, monkeypatch, capsys):
    """Run an example script as `python script args...` from tmp_path, without data sets."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLEXFLOW_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))

    def run_script(script, *args):
        monkeypatch.setattr(sys, "argv", [script, *args])
        runpy.run_path(str(EXAMPLES / script), run_name="__main__")
        return capsys.readouterr().out
    return run_script


@pytest.mark.parametrize("export, train, args", [
    ("mnist_mlp_torch.py", "mnist_mlp.py", ("-b", "16", "--num-samples", "32")),
    ("cifar10_cnn_torch.py", "cifar10_cnn.py", ("-b", "8", "--num-samples", "16")),
    ("resnet_torch.py", "resnet.py", ("-b", "2", "--num-samples", "4")),
])
def test_file_route_examples(export, train, args, run, tmp_path):
    out = run(export, "-f", "model.ff")
    assert "wrote model.ff and model.ff.npz" in out
    assert (tmp_path / "model.ff").is_file() and (tmp_path / "model.ff.npz").is_file()
    out = run(train, "-f", "model.ff", "-e", "1", *args)
    assert ELAPSED.search(out), out


def test_cnn_example_names_its_layers(run):
    run("cifar10_cnn_torch.py")
    out = run("cifar10_cnn.py", "-b", "8", "-e", "1", "--num-samples", "8")
    assert "20 layers; the first: Conv2D(conv1_100)" in out
    assert "layer 'relu_1': Relu(relu_1_103)" in out  # FX node names are the layer names


def test_in_process_example(run):
    out = run("mnist_mlp_torch2.py", "-b", "16", "-e", "1", "--num-samples", "32")
    assert "outputs: [(16, 10)]" in out and ELAPSED.search(out)
