"""Keras optimizers: hold their hyper-parameters and create the FlexFlow optimizer at compile.

`learning_rate` may also be passed as `lr`, the name older Keras (and FlexFlow's examples) use.
"""

from __future__ import annotations

from flexflow.core import AdamOptimizer, SGDOptimizer
from flexflow.optimizers import checked_learning_rate


class Optimizer:
    """A negative or non-finite learning rate is refused (`ValueError`) where it is given."""

    def __init__(self, learning_rate: float, name: str, kwargs: dict):
        self.lr = checked_learning_rate(kwargs.pop("lr", learning_rate), type(self).__name__)
        if kwargs:
            raise TypeError(f"{type(self).__name__} got unsupported arguments {sorted(kwargs)}")
        self.name = name
        self.ffhandle = None

    def create_ffhandle(self, ffmodel):
        """The FlexFlow optimizer for `ffmodel` (one per compiled model)."""
        raise NotImplementedError

    def set_learning_rate(self, learning_rate: float) -> None:
        self.lr = checked_learning_rate(learning_rate,
                                        f"{type(self).__name__}.set_learning_rate")
        if self.ffhandle is not None:
            self.ffhandle.set_learning_rate(self.lr)

    @property
    def learning_rate(self) -> float:
        return self.lr


class SGD(Optimizer):
    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, name="SGD", **kwargs):
        super().__init__(learning_rate, name, kwargs)
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)

    def create_ffhandle(self, ffmodel):
        self.ffhandle = SGDOptimizer(ffmodel, self.lr, self.momentum, self.nesterov)
        return self.ffhandle


class Adam(Optimizer):
    """Adam with Keras's epsilon placement: w -= lr_t * m / (sqrt(v) + epsilon)."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-07,
                 amsgrad=False, name="Adam", **kwargs):
        super().__init__(learning_rate, name, kwargs)
        if amsgrad:
            raise ValueError("Adam(amsgrad=True) is not supported")
        self.beta1, self.beta2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)
        self.amsgrad = False

    def create_ffhandle(self, ffmodel):
        self.ffhandle = AdamOptimizer(ffmodel, self.lr, self.beta1, self.beta2,
                                      epsilon=self.epsilon)
        return self.ffhandle


_BY_NAME = {"sgd": SGD, "adam": Adam}


def get(identifier) -> Optimizer:
    """An Optimizer from an instance or a name ('sgd', 'adam'; any case) with default settings."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"unknown optimizer {identifier!r}; expected a flexflow.keras.optimizers "
                     f"SGD or Adam, or one of the names {sorted(_BY_NAME)}")
