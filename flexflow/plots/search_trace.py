"""The search's trace: the simulated iteration time of the current strategy and of the best so
far, after each proposal (FlexFlow prints these every 1000 proposals; the picture shows all)."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import new_figure, save


@dataclass
class SearchTrace:
    """Filled during a search, one `record` per proposal."""

    current: list[float] = field(default_factory=list)  # ms, after the proposal was judged
    best: list[float] = field(default_factory=list)

    def record(self, current_ms: float, best_ms: float) -> None:
        self.current.append(current_ms)
        self.best.append(best_ms)


def draw(path: str, trace: SearchTrace, data_parallel_ms: float | None = None) -> None:
    """The trace on a scale fitted to it; data parallelism as a line when it falls in that
    range, else named in the title (it is often several times slower than what the search
    explores)."""
    if not trace.best:
        raise ValueError("the search trace is empty: no proposal was recorded")
    figure = new_figure(7, 3.2)
    ax = figure.subplots()
    proposals = range(1, len(trace.best) + 1)
    ax.plot(proposals, trace.current, color="#9ecae1", linewidth=0.8, label="current strategy")
    ax.step(proposals, trace.best, where="post", color="#08519c", linewidth=1.8,
            label="best strategy")
    low, high = min(trace.best), max(trace.current)
    margin = 0.05 * (high - low) or 0.05 * high
    title = f"MCMC search: {len(trace.best)} proposals, best {trace.best[-1]:.2f} ms"
    if data_parallel_ms is not None:
        if data_parallel_ms <= high + margin:
            high = max(high, data_parallel_ms)
            ax.axhline(data_parallel_ms, color="#d62728", linestyle="--", linewidth=1,
                       label=f"data parallel ({data_parallel_ms:.2f} ms)")
        else:
            title += f" (data parallel: {data_parallel_ms:.2f} ms, above the chart)"
    ax.set_ylim(low - margin, high + margin)
    ax.set_xlabel("proposal")
    ax.set_ylabel("simulated iteration time (ms)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(figure, path)
