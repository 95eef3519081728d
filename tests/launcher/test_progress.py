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


def test_text_printed_during_a_bar_gets_its_own_line():
    terminal = Terminal()
    with Progress("MCMC search", 4, stream=terminal) as progress:
        text = progress.around(terminal)
        progress.update()
        print("iteration(1) current_strategy(2.0) best_strategy(1.0)", file=text)
        progress.update(3)
    lines = terminal.getvalue().split("\n")
    # the bar is erased before the text and drawn again after it
    assert lines[0].endswith("\r\x1b[Kiteration(1) current_strategy(2.0) best_strategy(1.0)")
    assert lines[1].startswith("\rMCMC search [") and "4/4 (100%)" in lines[1]
    assert lines[2:] == [""]


def test_a_finished_bar_erased_by_later_text_is_not_drawn_again():
    terminal = Terminal()
    with Progress("MCMC search", 2, stream=terminal) as progress:
        progress.update(2)
        print("MCMC search: 2 proposals", file=progress.around(terminal))
    assert terminal.getvalue().endswith("\r\x1b[KMCMC search: 2 proposals\n")
