"""The MNIST examples on real MNIST: the Sequential MLP passes its VerifyMetrics(90) check (one
epoch), the Sequential CNN reaches at least 97% test accuracy through evaluate, and the net2net
student starts at its teacher's test accuracy.

MNIST is the `mnist_dir` fixture's (tests/conftest.py); the loader verifies its published
checksums."""

import re

import pytest

from .examples_runner import run_example


@pytest.fixture
def real_mnist(mnist_dir, monkeypatch):
    monkeypatch.setenv("FLEXFLOW_DATA_DIR", str(mnist_dir))
    monkeypatch.delenv("FLEXFLOW_DATA_VERIFY", raising=False)


def percent(out: str, label: str) -> float:
    return float(re.search(rf"^{label}: ([\d.]+)%$", out, re.MULTILINE).group(1))


def test_sequential_mlp_passes_its_accuracy_check(real_mnist, monkeypatch):
    out = run_example("seq_mnist_mlp.py", ["-b", "64", "-e", "1"], monkeypatch)
    assert "synthetic" not in out
    # VerifyMetrics(ModelAccuracy.MNIST_MLP) raised no AssertionError; the epoch beat 90%
    assert "Accuracy reaches, now early stop, epoch: 0" in out
    print(out[out.index("Epoch 1/"):])  # shown with pytest -rP
    assert percent(out, "test accuracy") >= 90


def test_sequential_cnn_reaches_97_percent_test_accuracy(real_mnist, monkeypatch):
    out = run_example("seq_mnist_cnn.py", ["-b", "64", "-e", "2"], monkeypatch)
    assert "synthetic" not in out
    print(out[out.index("Epoch 1/"):])
    assert percent(out, "test accuracy") >= 97.0, out[-2000:]


def test_net2net_student_starts_at_the_teachers_accuracy(real_mnist, monkeypatch):
    out = run_example("seq_mnist_mlp_net2net.py",
                      ["-b", "64", "-e", "1", "--num-samples", "6400", "--accuracy", "0"],
                      monkeypatch)
    print(out)
    teacher = percent(out, "teacher test accuracy")
    assert teacher > 80
    assert percent(out, "student test accuracy before training") == teacher
