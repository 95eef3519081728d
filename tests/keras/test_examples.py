"""Every script of examples/keras runs to the end on a few synthetic samples (no data set files,
no network; CIFAR-10 scripts on 8x8 images), with its accuracy checks set to 0%: the scripts,
their model constructions and the API calls they make work as written. Net2net scripts print
the teacher's test accuracy and the student's before training: they must be equal."""

import pytest

from flexflow.keras.datasets import files
from flexflow.keras.utils.data_utils import DownloadError

from .examples_runner import EXAMPLES, run_example

QUICK = ["-b", "16", "-e", "1", "--num-samples", "32", "--accuracy", "0"]
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py")
                 if p.stem not in ("accuracy", "example_data", "example_models"))
CIFAR_SCRIPTS = [name for name in SCRIPTS if "cifar10" in name or name == "callback.py"]
EXTRA_ARGS = {**{name: ["--image-size", "8"] for name in CIFAR_SCRIPTS},
              "func_cifar10_alexnet.py": ["--image-size", "63"],
              "keras_extras.py": ["--num-samples", "160"]}


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    """Empty data folders, and downloads that fail at once."""
    monkeypatch.setenv("FLEXFLOW_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))

    def offline(origin, *args, **kwargs):
        raise DownloadError(f"downloading {origin} failed: offline test")
    monkeypatch.setattr(files, "download", offline)


def test_every_feature_of_flexflows_keras_examples_has_a_script():
    flexflow_names = {
        "seq_mnist_mlp", "seq_mnist_cnn", "seq_reuters_mlp", "seq_cifar10_cnn",
        "seq_mnist_mlp_net2net", "seq_mnist_cnn_net2net", "seq_mnist_cnn_nested",
        "func_mnist_mlp", "func_mnist_mlp_concat", "func_mnist_mlp_concat2", "func_mnist_cnn",
        "func_mnist_cnn_concat", "func_mnist_mlp_net2net", "func_cifar10_cnn",
        "func_cifar10_cnn_nested", "func_cifar10_alexnet", "func_cifar10_cnn_net2net",
        "func_cifar10_cnn_concat", "func_cifar10_cnn_concat_model",
        "func_cifar10_cnn_concat_seq_model", "callback", "unary", "reshape",
        "elementwise_max_min", "elementwise_mul_broadcast", "identity_loss", "reduce_sum",
        "rsqrt"}
    assert flexflow_names <= {name[:-3] for name in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs(script, no_data, monkeypatch):
    out = run_example(script, QUICK + EXTRA_ARGS.get(script, []), monkeypatch)
    if "student test accuracy before training" in out:
        teacher = out.split("teacher test accuracy: ")[1].split("%")[0]
        student = out.split("student test accuracy before training: ")[1].split("%")[0]
        assert student == teacher, out
