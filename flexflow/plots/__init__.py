"""Pictures (matplotlib; PNG or SVG, chosen by the file name): a strategy as its layer graph
coloured by device (`strategy_graph`), simulated per-device timelines (`timeline`), and the
search's trace (`search_trace`).

Figures are built with matplotlib's object API (`matplotlib.figure.Figure`), never pyplot, so
drawing one changes no global state of the user's process (backends, open figures).
"""

from __future__ import annotations

from pathlib import Path

FORMATS = (".png", ".svg")
DPI = 100


class PlotError(ValueError):
    """A picture cannot be drawn: unsupported file type or matplotlib missing."""


def check_path(path: str, flag: str) -> None:
    """Refuse a picture file name before any work starts (whether the file can be written is
    deployment.check_output_file's)."""
    if Path(path).suffix.lower() not in FORMATS:
        raise PlotError(f"{flag} {path}: pictures are written as {' or '.join(FORMATS)} "
                        f"(chosen by the file name)")
    figure_class()


def figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError("drawing pictures (--timeline, --search-plot) needs matplotlib: pip "
                        "install \"flexflow-dask[viz]\"") from None
    return Figure


def new_figure(width: float, height: float):
    return figure_class()(figsize=(width, height), layout="constrained")


def save(figure, path: str) -> None:
    """PNG at a modest resolution, or SVG with its text kept as text (searchable, smaller)."""
    from matplotlib import rc_context

    with rc_context({"svg.fonttype": "none"}):
        figure.savefig(path, dpi=DPI)


def device_colour(device: int):
    """One colour per device, the same in every picture: tab20's strong colours for devices
    0-9, its light ones for 10-19, then round again."""
    from matplotlib import colormaps

    index = device % 20
    return colormaps["tab20"](2 * index if index < 10 else 2 * (index - 10) + 1)
