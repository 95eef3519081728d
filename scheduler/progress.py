"""Progress of long steps (calibration, search): a bar redrawn in place on a terminal, a few plain
lines otherwise (logs, CI, pipes), so neither floods its output.

    with Progress("MCMC search", total=budget + 1) as progress:
        for ...:
            progress.update(info=f"best {best:.3f} ms")   # one step done
    # or progress.update(done=k) to set the count; close() (or the with block) ends it

Text printed while a bar is drawn should go through `progress.around(stream)`, which takes the
bar off its line first (it comes back at the next update), so the two never share a line.
`FLEXFLOW_PROGRESS=bar|lines|off` overrides the choice.
"""

from __future__ import annotations

import os
import sys
import time

BAR_WIDTH = 30
REDRAW_SECONDS = 0.1  # a terminal bar is redrawn at most this often
LINES = 10            # plain mode prints at every tenth of the work (and at the end)


def _mode(stream) -> str:
    chosen = os.environ.get("FLEXFLOW_PROGRESS", "").lower()
    if chosen in ("bar", "lines", "off"):
        return chosen
    is_terminal = getattr(stream, "isatty", lambda: False)()
    return "bar" if is_terminal and os.environ.get("TERM") != "dumb" else "lines"


class Progress:
    def __init__(self, title: str, total: int, stream=None):
        self.title = title
        self.total = max(int(total), 0)
        self.stream = stream or sys.stderr
        self.mode = _mode(self.stream)
        self.done = 0
        self.info = ""
        self._started = time.perf_counter()
        self._drawn_at = 0.0
        self._next_line = 1
        self._shown: tuple[int, str] | None = None  # (done, info) on the line now
        self._final_shown: tuple[int, str] | None = None  # the finished state, once written
        self._closed = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, steps: int = 1, *, done: int | None = None, info: str = "") -> None:
        """Count `steps` more done (or set the count to `done`); `info` is shown after it."""
        self.done = min(self.total, self.done + steps if done is None else done)
        if info:
            self.info = info
        finished = self.done == self.total
        if self.mode == "bar":
            now = time.perf_counter()
            if finished or now - self._drawn_at >= REDRAW_SECONDS:
                self._drawn_at = now
                self._show("\r" + self._bar() + "\x1b[K")
        elif self.mode == "lines" and (finished or
                                       self.done * LINES >= self._next_line * self.total):
            while self.total and self.done * LINES >= self._next_line * self.total:
                self._next_line += 1
            self._show(self._line() + "\n")

    def around(self, stream) -> "_AroundBar":
        """`stream` for text printed while the bar is drawn (see the module docstring)."""
        return _AroundBar(stream, self)

    def clear(self) -> None:
        """Take a drawn bar off its line; the next update draws it again."""
        if self.mode == "bar" and self._shown is not None and not self._closed:
            self._write("\r\x1b[K")
            self._shown = None
            self._drawn_at = 0.0

    def close(self, info: str = "") -> None:
        """Finish: show the final state unless it was shown (and end the bar's line)."""
        if self._closed:
            return
        if info:
            self.info = info
        if self.mode == "bar":
            if (self.done, self.info) not in (self._shown, self._final_shown):
                self._show("\r" + self._bar() + "\x1b[K")
            if self._shown is not None:  # a bar is on the line
                self._write("\n")
        elif self.mode == "lines" and (self.done, self.info) != self._shown:
            self._show(self._line() + "\n")
        self._closed = True

    def _show(self, text: str) -> None:
        self._shown = (self.done, self.info)
        if self.done == self.total:
            self._final_shown = self._shown
        self._write(text)

    # ---- text -----------------------------------------------------------------------------------
    def _elapsed(self) -> str:
        return f"{time.perf_counter() - self._started:.1f}s"

    def _counts(self) -> str:
        percent = 100 * self.done // self.total if self.total else 100
        return f"{self.done}/{self.total} ({percent}%)"

    def _bar(self) -> str:
        filled = BAR_WIDTH * self.done // self.total if self.total else BAR_WIDTH
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        remaining = ""
        if 0 < self.done < self.total:
            seconds = (time.perf_counter() - self._started) * (self.total - self.done) / self.done
            remaining = f" ~{seconds:.0f}s left"
        info = f"  {self.info}" if self.info else ""
        return f"{self.title} [{bar}] {self._counts()} {self._elapsed()}{remaining}{info}"

    def _line(self) -> str:
        info = f"; {self.info}" if self.info else ""
        return f"{self.title}: {self._counts()} after {self._elapsed()}{info}"

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


class _AroundBar:
    """A text stream that clears the progress bar before writing."""

    def __init__(self, stream, progress: Progress):
        self._stream = stream
        self._progress = progress

    def write(self, text: str) -> int:
        self._progress.clear()
        return self._stream.write(text)

    def __getattr__(self, name):  # flush, isatty, ...
        return getattr(self._stream, name)
