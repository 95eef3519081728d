"""Progress: a bar redrawn in place on a terminal; elsewhere a line at every tenth of the work,
ending at 100%; FLEXFLOW_PROGRESS overrides the choice."""

import io
import re

import pytest

from flexflow.scheduler.progress import Progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(autouse=True)
def no_override(monkeypatch):
    monkeypatch.delenv("FLEXFLOW_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")


def run(stream, total=25, steps=None):
    with Progress("MCMC search", total, stream=stream) as progress:
        for i in range(total if steps is None else steps):
            progress.update(info=f"best {i}")
    return stream.getvalue()


def test_plain_lines_at_every_tenth():
    lines = run(io.StringIO()).splitlines()
    counts = [int(re.match(r"MCMC search: (\d+)/25 \(\d+%\) after [\d.]+s; best \d+$", line)
                  .group(1)) for line in lines]
    assert counts == [3, 5, 8, 10, 13, 15, 18, 20, 23, 25]  # first count past each tenth
    assert lines[-1].startswith("MCMC search: 25/25 (100%)") and lines[-1].endswith("best 24")


def test_an_unfinished_run_ends_with_its_state():
    assert run(io.StringIO(), total=10, steps=3).splitlines()[-1].startswith(
        "MCMC search: 3/10 (30%)")


def test_terminal_bar_is_redrawn_in_place():
    text = run(Terminal(), total=5)
    assert text.startswith("\rMCMC search [") and text.endswith("\x1b[K\n")
    assert text.count("\n") == 1  # one line, redrawn
    final = text.rsplit("\r", 1)[1]
    assert "[" + "#" * 30 + "] 5/5 (100%)" in final and "best 4" in final


@pytest.mark.parametrize("mode, expect", [("off", ""), ("lines", "MCMC search: 25/25")])
def test_environment_override(monkeypatch, mode, expect):
    monkeypatch.setenv("FLEXFLOW_PROGRESS", mode)
    text = run(Terminal())
    assert expect in text and (expect or text == "")
