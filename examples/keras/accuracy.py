"""Accuracies (percent) the Keras examples check with VerifyMetrics / EpochVerifyMetrics."""

from enum import Enum

from flexflow.keras.callbacks import EpochVerifyMetrics, VerifyMetrics


class ModelAccuracy(Enum):
    MNIST_MLP = 90
    MNIST_CNN = 90
    REUTERS_MLP = 90
    CIFAR10_CNN = 90
    CIFAR10_ALEXNET = 90


def accuracy_checks(args, expected: ModelAccuracy, early_stop: bool = True) -> list:
    """FlexFlow's checks: fail below the expected training accuracy of the last epoch and stop
    once an epoch exceeds it. `--accuracy P` (for quick runs) replaces the expected value."""
    threshold = expected if args.accuracy is None else args.accuracy
    checks = [VerifyMetrics(threshold)]
    if early_stop:
        checks.append(EpochVerifyMetrics(threshold))
    return checks
