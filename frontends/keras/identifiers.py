"""Keras identifiers: a loss, metric or initializer given as an instance or by a name ("mse"),
as `losses.get`, `metrics.get` and `initializers.get` take them."""

from __future__ import annotations


def resolve(identifier, base: type, by_name: dict, unknown: str):
    """`identifier` itself where it is a `base`, a new `by_name[identifier]()` where it is one of
    those names; else a ValueError that starts with `unknown` ("unsupported loss") and lists the
    choices."""
    if isinstance(identifier, base):
        return identifier
    if isinstance(identifier, str) and identifier in by_name:
        return by_name[identifier]()
    raise ValueError(f"{unknown} {identifier!r}; expected a {base.__module__}.{base.__qualname__} "
                     f"or one of {sorted(by_name)}")
