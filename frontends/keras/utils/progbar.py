"""Progbar: the Keras-style progress line of an epoch (or an evaluation).

On a terminal it redraws one line in place: steps done, a bar, the time left and the running
values. When the output is not a terminal (a log file, a pipe) it writes nothing while running
and one plain line at the end, so logs stay readable.
"""

from __future__ import annotations

import sys
import time


def format_values(values: dict) -> str:
    return "".join(f" - {key}: {_number(value)}" for key, value in values.items())


def _number(value: float) -> str:
    return f"{value:.4f}" if value == 0 or abs(value) >= 1e-3 else f"{value:.4e}"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    if seconds >= 60:
        return f"{seconds // 60}:{seconds % 60:02d}"
    return f"{seconds}s"


class Progbar:
    def __init__(self, target: int, samples_per_step: int, stream=None, interactive=None,
                 width: int = 30, redraw_every_s: float = 0.1):
        self.target = target
        self.samples_per_step = samples_per_step
        self.stream = stream if stream is not None else sys.stdout
        isatty = getattr(self.stream, "isatty", None)
        self.interactive = bool(isatty and isatty()) if interactive is None else interactive
        self.width = width
        self.redraw_every_s = redraw_every_s
        self.start = time.perf_counter()
        self._last_draw = -redraw_every_s
        self._drawn = 0

    def _bar(self, step: int) -> str:
        done = self.width * step // max(self.target, 1)
        arrow = ">" if step < self.target and done < self.width else ""
        return "[" + ("=" * done + arrow).ljust(self.width, ".") + "]"

    def _rate(self, step: int, elapsed: float) -> str:
        rate = step * self.samples_per_step / elapsed if elapsed > 0 else 0.0
        return f" - {rate:.0f} samples/s"

    def update(self, step: int, values: dict) -> None:
        """`step` steps done; `values` are running means. Redraws at most every
        `redraw_every_s` seconds, and only on a terminal."""
        now = time.perf_counter()
        if not self.interactive or now - self._last_draw < self.redraw_every_s:
            return
        self._last_draw = now
        elapsed = now - self.start
        eta = elapsed / step * (self.target - step) if step else 0.0
        width = len(str(self.target))
        line = (f"{step:>{width}}/{self.target} {self._bar(step)} - ETA: {_duration(eta)}"
                f"{format_values(values)}{self._rate(step, elapsed)}")
        self._write("\r" + line.ljust(self._drawn))
        self._drawn = len(line)

    def finish(self, values: dict) -> None:
        """The closing line: total time, time per step, the final values, samples/s."""
        elapsed = time.perf_counter() - self.start
        per_step = f"{1000 * elapsed / self.target:.0f}ms/step" if self.target else ""
        if self.interactive:
            head = (f"\r{self.target}/{self.target} {self._bar(self.target)} - "
                    f"{_duration(elapsed)} {per_step}")
        else:
            head = f"{self.target}/{self.target} - {_duration(elapsed)} - {per_step}"
        line = f"{head}{format_values(values)}{self._rate(self.target, elapsed)}"
        self._write(line.ljust(self._drawn) + "\n")
        self._drawn = 0

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
