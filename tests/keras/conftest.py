"""Keras models read FlexFlow's flags from sys.argv, as FlexFlow's do; tests give them a clean
command line (pytest's own flags such as `-p` would otherwise be parsed) and fresh default layer
names."""

import sys

import pytest

from flexflow.keras import backend


@pytest.fixture(autouse=True)
def clean_command_line(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["test", "-b", "8"])
    backend.clear_session()
