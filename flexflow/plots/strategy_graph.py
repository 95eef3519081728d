"""A strategy drawn on its model: the layer graph top to bottom (a layer one row below the
deepest layer it reads), each layer a box striped with the colours of the devices its partitions
run on and labelled with its name and degrees (batch-first)."""

from __future__ import annotations

from typing import Mapping

from . import device_colour, new_figure, save

BOX_WIDTH, BOX_HEIGHT = 1.6, 0.5


def depths(graph) -> list[int]:
    """Each layer's row: 0 for layers that read only model inputs, else one more than the
    deepest layer it reads (layers are in topological order)."""
    depth: list[int] = []
    for layer in graph.layers:
        producers = [graph.tensors[t].producer for t in layer.inputs]
        depth.append(max([depth[p[0]] + 1 for p in producers if p is not None], default=0))
    return depth


def positions(graph) -> dict[int, tuple[float, float]]:
    """Centre (x, y) of each layer's box; the layers of a row side by side, centred."""
    rows: dict[int, list[int]] = {}
    for index, depth in enumerate(depths(graph)):
        rows.setdefault(depth, []).append(index)
    where = {}
    for depth, members in rows.items():
        for k, index in enumerate(members):
            where[index] = ((k - (len(members) - 1) / 2) * (BOX_WIDTH + 0.4), -depth)
    return where


def draw(path: str, graph, strategy: Mapping[str, object], title: str = "") -> None:
    """`strategy` maps layer names to ParallelConfigs (every layer of `graph` needs one)."""
    missing = [layer.name for layer in graph.layers if layer.name not in strategy]
    if missing:
        raise ValueError(f"the strategy has no configuration for layers {missing}")
    from matplotlib.patches import Patch, Rectangle

    where = positions(graph)
    xs = [x for x, _ in where.values()]
    rows = 1 - min(y for _, y in where.values())
    figure = new_figure(max(4.0, 1.2 * (max(xs) - min(xs) + BOX_WIDTH + 0.6)), 0.7 + 0.62 * rows)
    ax = figure.subplots()
    used: set[int] = set()
    for layer in graph.layers:
        x, y = where[layer.index]
        for t in layer.inputs:
            producer = graph.tensors[t].producer
            if producer is not None:
                px, py = where[producer[0]]
                ax.annotate("", xy=(x, y + BOX_HEIGHT / 2), xytext=(px, py - BOX_HEIGHT / 2),
                            arrowprops={"arrowstyle": "->", "color": "#555555", "lw": 0.8})
        config = strategy[layer.name]
        devices = list(dict.fromkeys(config.devices))
        used.update(devices)
        stripe = BOX_WIDTH / len(devices)
        left = x - BOX_WIDTH / 2
        for k, device in enumerate(devices):
            ax.add_patch(Rectangle((left + k * stripe, y - BOX_HEIGHT / 2), stripe, BOX_HEIGHT,
                                   facecolor=device_colour(device), edgecolor="none"))
        ax.add_patch(Rectangle((left, y - BOX_HEIGHT / 2), BOX_WIDTH, BOX_HEIGHT, fill=False,
                               edgecolor="#333333", linewidth=0.8))
        degrees = "x".join(str(d) for d in config.degrees)
        ax.text(x, y, f"{layer.name}\n{degrees}", ha="center", va="center", fontsize=6.5,
                bbox={"facecolor": "white", "alpha": 0.7, "edgecolor": "none", "pad": 0.5})
    ax.set_xlim(min(xs) - BOX_WIDTH, max(xs) + BOX_WIDTH)
    ax.set_ylim(-rows + 0.4, 0.6)
    ax.set_axis_off()
    ax.legend(handles=[Patch(facecolor=device_colour(d), label=f"device {d}")
                       for d in sorted(used)], loc="upper left", fontsize=7, frameon=False,
              bbox_to_anchor=(1.0, 1.0))
    if title:
        ax.set_title(title, fontsize=9)
    save(figure, path)
