"""The `flexflow` command (`python -m flexflow.cli` without the console script).

    flexflow strategy show FILE                          the strategy as a table
    flexflow strategy show FILE --plot OUT.png --model SCRIPT [ARGS...]
                                                         ... and drawn on the model's layer graph

FILE is a strategy file in FlexFlow's text format or our JSON form (`--export` writes both). A
strategy file names layers but not how they connect, so drawing needs the model: SCRIPT runs
(through the launcher, in this process, with `--import FILE`, `--in-process` and as many devices
as the strategy uses) until it compiles its model, which checks the strategy against the model
and gives the graph to draw; the script stops there.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Mapping, Sequence

from .launcher import quiet_when_stdout_closes
from .scheduler.strategy import ParallelConfig
from .scheduler.strategy_file import read


def guid_order(name: str) -> tuple[int, str]:
    """Layers sorted as built: by the guid FlexFlow's names end with."""
    match = re.search(r"_(\d+)$", name)
    return (int(match.group(1)) if match else sys.maxsize, name)


def device_ranges(devices: Sequence[int]) -> str:
    """`0-3,6` for (0, 1, 2, 3, 6)."""
    pieces: list[str] = []
    start = previous = None
    for device in list(devices) + [None]:
        if start is not None and device == previous + 1:
            previous = device
            continue
        if start is not None:
            pieces.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = device
    return ",".join(pieces)


def strategy_table(strategy: Mapping[str, ParallelConfig]) -> str:
    """One row per layer; a column saying which recompute, one saying which shard their
    weights, one with the partitions that share each output box by splitting its sum
    (`ParallelConfig.contraction`), one with those that compute it whole (`replicas`), and one
    with each layer's micro-batches (a pipeline stage's parts on a device,
    `ParallelConfig.micro_batches`; its devices then listed once, and 1F1B's bound on those
    in flight where it has one), where any does."""
    marks = [(title, field) for title, field in (("recomputed", "recompute"),
                                                   ("sharded weights", "shard_weights"))
             if any(getattr(config, field) for config in strategy.values())]
    counts = [field for field in ("contraction", "replicas")
              if any(getattr(config, field) > 1 for config in strategy.values())]
    micro = {name: config.micro_batches for name, config in strategy.items()}
    piped = any(m > 1 for m in micro.values())
    rows = [("layer", "degrees (batch first)", "parts", "devices") + tuple(counts)
            + (("micro-batches",) if piped else ()) + tuple(title for title, _ in marks)]
    for name in sorted(strategy, key=guid_order):
        config = strategy[name]
        rows.append((name, " x ".join(str(d) for d in config.degrees), str(config.num_parts),
                     device_ranges(list(dict.fromkeys(config.devices))))
                    + tuple(str(getattr(config, field)) if getattr(config, field) > 1 else ""
                            for field in counts)
                    + ((micro_cell(micro[name], config.in_flight),) if piped else ())
                    + tuple("yes" if getattr(config, field) else "" for _, field in marks))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in rows)


def micro_cell(micro: int, in_flight: int) -> str:
    """`8` for GPipe's 8 micro-batches, `8, 1F1B: 3 in flight` for 1F1B's."""
    return str(micro) + (f", 1F1B: {in_flight} in flight" if in_flight else "")


class _Compiled(Exception):
    """Raised from compile() to stop a script once its model exists."""

    def __init__(self, model):
        super().__init__("model compiled")
        self.model = model


def compiled_model(script: str, args: Sequence[str]):
    """Run `script` with `args` through the launcher until its first compile(); its FFModel."""
    from . import config, launcher
    from .model import FFModel

    original = FFModel.compile

    def compile_and_stop(self, *positional, **keywords):
        original(self, *positional, **keywords)
        raise _Compiled(self)

    FFModel.compile = compile_and_stop
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    try:
        launcher.launch([script, *args])
    except _Compiled as stop:
        return stop.model
    finally:
        FFModel.compile = original
        sys.argv[:], sys.path[:] = saved_argv, saved_path
        config.set_runtime_args([])
    raise SystemExit(f"flexflow: {script} finished without compiling a model")


def show(args: argparse.Namespace) -> int:
    strategy = read(args.file)
    print(strategy_table(strategy))
    if args.plot:
        from .plots import check_path, strategy_graph

        check_path(args.plot, "--plot")
        if not args.model:
            raise SystemExit("flexflow strategy show: --plot draws the strategy on the model's "
                             "layer graph, which a strategy file does not hold: add --model "
                             "SCRIPT [ARGS...]")
        devices = max((d for c in strategy.values() for d in c.devices), default=0) + 1
        model = compiled_model(args.model[0], [*args.model[1:], "--import", args.file,
                                               "-ll:gpu", str(devices), "--in-process"])
        strategy_graph.draw(args.plot, model.graph, model.strategy, title=args.file)
        print(f"drew {args.file} on {args.model[0]}'s layer graph: {args.plot}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="flexflow", description="flexflow-dask tools")
    commands = top.add_subparsers(dest="command", required=True)
    strategy = commands.add_parser("strategy", help="inspect strategy files")
    actions = strategy.add_subparsers(dest="action", required=True)
    show_parser = actions.add_parser("show", help="print a strategy file as a table")
    show_parser.add_argument("file", help="strategy file (FlexFlow text format or JSON)")
    show_parser.add_argument("--plot", metavar="OUT",
                             help="also draw it on the model's layer graph (.png or .svg)")
    show_parser.add_argument("--model", nargs=argparse.REMAINDER, metavar="SCRIPT ARGS",
                             help="the training script (and its arguments) that builds the model")
    show_parser.set_defaults(run=show)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """The `flexflow` command; a reader that stops early (`| head -1`) ends it silently with
    status 141 (`launcher.quiet_when_stdout_closes`)."""
    return quiet_when_stdout_closes(run, argv)


def run(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
