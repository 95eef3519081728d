"""Simulated timelines: one Gantt chart per strategy, stacked on one time axis, with a row per
device (each fused group it runs, framed and labelled with the layer it is named after, with its
tasks coloured by what they do) and a row
per link resource (the transfers booked on it, which the simulation records when asked to)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Sequence

from ..scheduler.fusion import naming_key
from . import new_figure, save

# Colour of a task by what its action does; the rest of a fused group's time is the executor's
# overhead of running it.
ACTION_PHASES = {"Load": "load", "Fill": "load", "Forward": "forward",
                 "ForwardPartial": "forward", "Loss": "loss", "Backward": "backward",
                 "BackwardPartial": "backward", "CheckShard": "update", "Update": "update"}
PHASE_COLOURS = {"load": "#9D9D9D", "forward": "#4C78A8", "loss": "#E45756",
                 "backward": "#F58518", "update": "#54A24B", "send": "#B279A2",
                 "overhead": "#E6E6E6", "transfer": "#72B7B2"}


@dataclass(frozen=True)
class Bar:
    row: str
    start: float  # ms
    end: float
    phase: str
    outline: bool = False  # the frame of a fused group, drawn around its tasks ...
    label: str = ""        # ... and labelled with the layer the group is named after


def bars(simulation) -> list[Bar]:
    """Per device, each fused task's frame, its overhead and its tasks in order (a full
    simulation keeps them); per link resource, the transfers booked on it
    (`simulation.transfers`: (resource, start, end) triples, recorded when asked for)."""
    out = []
    for plan, start, end in zip(simulation.plans, simulation.starts, simulation.ends):
        row = f"device {plan.device}"
        out.append(Bar(row, start, end, "overhead", outline=True, label=_layer_of(plan)))
        clock = end - sum(plan.task_ms)
        for task, ms in zip(plan.tasks, plan.task_ms):
            phase = ACTION_PHASES.get(type(task.action).__name__, "send")
            out.append(Bar(row, clock, clock + ms, phase))
            clock += ms
    for resource, start, end in simulation.transfers:
        out.append(Bar(f"link {resource}", start, end, "transfer"))
    return out


def _layer_of(plan) -> str:
    """The layer a group is named after (its first task of a model layer: fusion.naming_key)."""
    if not plan.tasks:
        return ""
    return reduce(naming_key, (task.key for task in plan.tasks)).layer


def _row_order(row: str) -> tuple:
    kind, _, name = row.partition(" ")
    return (kind != "device", int(name) if kind == "device" else 0, name)


def draw(path: str, panels: Sequence[tuple[str, object]]) -> None:
    """`panels`: (title, Simulation) pairs, e.g. the chosen strategy and data parallelism."""
    save(figure_of(panels), path)


def figure_of(panels: Sequence[tuple[str, object]]):
    """The timelines of `panels`, one above the other, each on its own time axis (a strategy
    several times faster than data parallelism would fill a fraction of a shared one)."""
    panel_bars = [bars(simulation) for _, simulation in panels]
    rows = sorted({b.row for group in panel_bars for b in group}, key=_row_order)
    height = 0.6 + len(panels) * (0.7 + 0.28 * len(rows))
    figure = new_figure(8, height)
    axes = figure.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (title, simulation), group in zip(axes, panels, panel_bars):
        index = {row: i for i, row in enumerate(rows)}
        for bar in group:
            colour = PHASE_COLOURS[bar.phase]
            # a frame in dark grey; a transfer edged in its own colour, so that one of a few
            # microseconds still shows as a hairline
            edge = "#333333" if bar.outline else colour if bar.phase == "transfer" else "none"
            ax.broken_barh([(bar.start, max(bar.end - bar.start, 1e-9))],
                           (index[bar.row] - 0.4, 0.8), facecolors=colour, edgecolors=edge,
                           linewidth=0.6)
            if bar.label:
                ax.text(bar.start, index[bar.row] - 0.22, f" {bar.label}", fontsize=5,
                        ha="left", va="center", clip_on=True)
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_title(f"{title}: {simulation.time:.2f} ms per iteration (simulated)", fontsize=9)
        ax.set_xlim(0, max([simulation.time] + [bar.end for bar in group]))
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlabel("time in the iteration (ms)", fontsize=8)
    shown = {b.phase for group in panel_bars for b in group}
    handles = [_patch(colour, phase) for phase, colour in PHASE_COLOURS.items()
               if phase in shown]
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8,
                  frameon=False)
    return figure


def _patch(colour: str, label: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=colour, label=label)


def draw_strategies(path: str, simulator, chosen) -> None:
    """The timeline of the `chosen` strategy above that of data parallelism (alone when the
    chosen strategy is data parallelism), both simulated on `simulator`'s machine."""
    from ..scheduler.strategy import data_parallel_strategy

    baseline = data_parallel_strategy(simulator.graph, simulator.num_devices)

    def simulate(strategy):
        return simulator.simulate_full(strategy, record_transfers=True)
    if dict(chosen) == baseline:
        panels = [("data parallel (the strategy used)", simulate(baseline))]
    else:
        panels = [("the strategy used", simulate(chosen)),
                  ("data parallel", simulate(baseline))]
    draw(path, panels)
