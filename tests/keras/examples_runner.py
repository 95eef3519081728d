"""Running the scripts of examples/keras in this process (no interpreter start-up per script):
with their own folder first on sys.path, their own command line, and their helper modules
(accuracy, example_data, example_models) loaded afresh, so they never mix with the native
examples' modules of the same names."""

from __future__ import annotations

import contextlib
import io
import runpy
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "keras"
HELPERS = ("accuracy", "example_data", "example_models")


def run_example(script: str, args: list[str], monkeypatch) -> str:
    """Run examples/keras/<script> as __main__ with `args`; returns what it printed."""
    for name in HELPERS:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setattr(sys, "argv", [str(EXAMPLES / script), *args])
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    finally:
        for name in HELPERS:
            sys.modules.pop(name, None)
    return out.getvalue()
