"""`flexflow.torch.nn`: the torch.nn classes FlexFlow's examples import from here.

FlexFlow also had an experimental, non-functional `Module` here (its call only printed
"forward"); models are plain `torch.nn.Module`s given to `PyTorchModel` instead.
"""

from torch.nn import Conv2d, Dropout, Flatten, Linear, MaxPool2d, Module, ReLU

__all__ = ["Conv2d", "Dropout", "Flatten", "Linear", "MaxPool2d", "Module", "ReLU"]
