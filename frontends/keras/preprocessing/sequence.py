"""Sequence preprocessing: `pad_sequences`."""

from __future__ import annotations

import numpy as np


def pad_sequences(sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre",
                  value=0.0) -> np.ndarray:
    """A (len(sequences), maxlen) array: each sequence cut to `maxlen` (dropping its start with
    truncating='pre', its end with 'post') and filled up with `value` before ('pre') or after
    ('post') it. `maxlen` defaults to the longest sequence."""
    if padding not in ("pre", "post") or truncating not in ("pre", "post"):
        raise ValueError(f"pad_sequences: padding and truncating must be 'pre' or 'post', got "
                         f"{padding!r}, {truncating!r}")
    sequences = [list(s) for s in sequences]
    if maxlen is None:
        maxlen = max((len(s) for s in sequences), default=0)
    out = np.full((len(sequences), int(maxlen)), value, dtype=dtype)
    for i, sequence in enumerate(sequences):
        if not sequence or maxlen == 0:
            continue
        kept = sequence[-maxlen:] if truncating == "pre" else sequence[:maxlen]
        if padding == "pre":
            out[i, maxlen - len(kept):] = kept
        else:
            out[i, :len(kept)] = kept
    return out
