"""The command line of a bench: one `--flag` per keyword default, typed by its default."""

from __future__ import annotations

import argparse


def command_line(doc: str, **defaults) -> argparse.Namespace:
    """Parses `--name value` for each keyword (`name_with_underscores` is `--name-with-
    underscores`): an int, float or str default reads that type, False is a switch, and a list
    reads one or more values of its first element's type. `doc`'s first line is the help."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in defaults.items():
        flag = "--" + name.replace("_", "-")
        if default is False:
            parser.add_argument(flag, action="store_true")
        elif isinstance(default, list):
            parser.add_argument(flag, type=type(default[0]), nargs="+", default=default)
        else:
            parser.add_argument(flag, type=type(default), default=default)
    return parser.parse_args()
