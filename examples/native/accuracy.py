"""Training accuracies (percent) the examples must reach when run with `-a/--test_acc`.

Members with equal values are aliases of one another (Enum semantics: ModelAccuracy.MNIST_CNN
is ModelAccuracy.MNIST_MLP), so only a member's value is meaningful, not its name.
"""

from enum import Enum


class ModelAccuracy(Enum):
    MNIST_MLP = 90
    MNIST_CNN = 90
    CIFAR10_CNN = 90
    CIFAR10_CNN_CONCAT = 90
    CIFAR10_ALEXNET = 90


def check_accuracy(ffmodel, expected: ModelAccuracy) -> None:
    """Fail the run if the accuracy accumulated since the last metrics reset is too low."""
    accuracy = ffmodel.get_perf_metrics().get_accuracy()
    assert accuracy >= expected.value, (
        f"accuracy {accuracy:.2f}% is below the expected {expected.value}%")
    print(f"accuracy {accuracy:.2f}% >= the expected {expected.value}%")
