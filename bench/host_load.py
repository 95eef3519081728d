"""What else the host is doing while a measured bench runs: the load average, and the share of
CPU time the hypervisor gave to other machines ("steal"). On a shared virtual machine steal
comes and goes in bursts of seconds to minutes and slows everything it touches, so measured
benches print it beside their figures."""

from __future__ import annotations

import os


def _cpu_times() -> list[int] | None:
    try:
        with open("/proc/stat") as stat:
            return [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):  # not Linux
        return None


class StealMeter:
    """CPU steal since the last reading, as a share of all CPU time."""

    def __init__(self):
        self._last = _cpu_times()

    def read(self) -> float | None:
        now = _cpu_times()
        if now is None or self._last is None or len(now) < 8:
            return None
        delta = [b - a for a, b in zip(self._last, now)]
        self._last = now
        total = sum(delta[:8])  # user nice system idle iowait irq softirq steal
        return delta[7] / total if total else 0.0


def describe(steal: float | None) -> str:
    """`load L, steal S%` for a line of a bench's output."""
    text = f"load {os.getloadavg()[0]:.1f}"
    return text if steal is None else f"{text}, steal {100 * steal:.0f}%"
