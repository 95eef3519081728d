"""Sliding-window arguments of Conv2D and the pooling layers (channels-first, NCHW).

Padding is one of 'valid', 'same', an int, a pair (ph, pw) of symmetric sizes, or
((top, bottom), (left, right)). 'same' follows Keras/TensorFlow: the output is ceil(size /
stride) and an odd total padding puts the extra row/column after (bottom/right).
"""

from __future__ import annotations

Pair = tuple[int, int]


def as_pair(value, what: str, layer_name: str) -> Pair:
    if isinstance(value, int):
        return (value, value)
    try:
        a, b = value
        return (int(a), int(b))
    except (TypeError, ValueError):
        raise ValueError(f"layer '{layer_name}': {what} must be an int or a pair of ints, got "
                         f"{value!r}") from None


def check_padding(padding, layer_name: str):
    """The padding argument, validated (resolved against a shape later by `resolve`)."""
    if padding in ("valid", "same"):
        return padding
    if isinstance(padding, int):
        return ((padding, padding), (padding, padding))
    try:
        h, w = padding
    except (TypeError, ValueError):
        h = w = None
    if h is None:
        raise ValueError(f"layer '{layer_name}': padding must be 'valid', 'same', an int, (ph, pw) "
                         f"or ((top, bottom), (left, right)), got {padding!r}")
    return (as_pair(h, "padding", layer_name), as_pair(w, "padding", layer_name))


def resolve(padding, size: Pair, kernel: Pair, strides: Pair) -> tuple[Pair, Pair]:
    """((top, bottom), (left, right)) for an input of spatial `size`."""
    if padding == "valid":
        return ((0, 0), (0, 0))
    if padding == "same":
        pads = []
        for n, k, s in zip(size, kernel, strides):
            total = max((-(-n // s) - 1) * s + k - n, 0)
            pads.append((total // 2, total - total // 2))
        return tuple(pads)
    return padding


def output_size(size: Pair, kernel: Pair, strides: Pair, pads: tuple[Pair, Pair]) -> Pair:
    out = []
    for n, k, s, (before, after) in zip(size, kernel, strides, pads):
        if n + before + after < k:
            raise ValueError(f"the input's spatial size {size} padded by {pads} is smaller than "
                             f"the window {kernel}")
        out.append((n + before + after - k) // s + 1)
    return tuple(out)


def check_channels_first(data_format, layer_name: str) -> None:
    if data_format not in (None, "channels_first"):
        raise ValueError(f"layer '{layer_name}': data_format={data_format!r} is not supported; "
                         f"tensors are channels-first (N, C, H, W)")
