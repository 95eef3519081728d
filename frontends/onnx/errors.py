"""The exception the ONNX front end raises for a model it cannot import, and its warning."""


class ONNXImportError(ValueError):
    """A malformed file or graph, an operator or attribute value FlexFlow does not support,
    control flow on constants or a constant too large to compute at import (fold_limits.py), or
    inputs that do not fit the graph. The message names the file, node (name and op type),
    attribute or input concerned."""


class ONNXImportWarning(UserWarning):
    """An input taken differently from what the file says, as FlexFlow's programs need: the
    legacy exporter's input name, or other dims than a file without parameters declares."""
