"""`flexflow_python`: runs a training script with FlexFlow's command line (reference 5.1).

    flexflow_python script.py -ll:py 1 -ll:gpu 2 -ll:fsize 3048 -ll:zsize 12192 -b 128 [flags]
    python -m flexflow script.py [same arguments]

Runtime flags (Legion's and Realm's: `-ll:*`, `-lg:*`, `-hl:*`, `-realm:*`, `-cuda:*`, `-numa:*`,
`-dm:*`, `-bishop:*`, `-level`, `-logfile`) are taken off the command line wherever they stand,
each with the value after it unless that value starts with `-`, as FlexFlow's launcher does. The
ones FFConfig understands (`-ll:gpu`, `-ll:cpu`, `-ll:fsize`, `-ll:zsize`, `-ll:util`,
`-ll:bgwork`) still reach it (`config.set_runtime_args`); the others have no meaning on Dask and
are dropped with a debug note (`FLEXFLOW_LOG_LEVEL=DEBUG` shows it). The script then runs as
`__main__` with `sys.argv = [script, remaining arguments...]` and its folder first on `sys.path`,
exactly as `python script.py` would run it (FlexFlow put its binary in `sys.argv[0]` and the
script in `sys.argv[1]`; scripts that parse with argparse see the same flags either way).

Before the script name: `--nocr` (FlexFlow: no control replication; nothing to do here),
`--freeze-on-error` and `--backtrace` (its driver's Legion debugging switches; Python prints the
traceback anyway) are accepted and ignored. `-c CMD` runs a command; no script (or `-`) starts an
interactive interpreter; `--help` prints FlexFlow's flags and `--version` the version.

A reader that stops early (`flexflow_python script.py | head -1`) ends the run as it ends a C
program, silently with status 141 (128 + SIGPIPE): `quiet_when_stdout_closes`, which the
`flexflow` command (cli.py) uses too.
"""

from __future__ import annotations

import code
import logging
import os
import runpy
import stat
import sys
from pathlib import Path
from typing import Callable, Sequence

from . import config

log = logging.getLogger("flexflow.launcher")

RUNTIME_PREFIXES = ("-lg:", "-hl:", "-realm:", "-ll:", "-cuda:", "-numa:", "-dm:", "-bishop:")
RUNTIME_FLAGS = ("-level", "-logfile")
IGNORED_OPTIONS = ("--nocr", "--freeze-on-error", "--backtrace")
USAGE = "usage: flexflow_python [--nocr] (script.py | -c COMMAND | -) [runtime flags] [args]"
CLOSED_PIPE_STATUS = 141  # 128 + SIGPIPE: what a shell reports of a program the signal ended


def is_runtime_flag(token: str) -> bool:
    return token.startswith(RUNTIME_PREFIXES) or token in RUNTIME_FLAGS


def split_runtime_flags(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(runtime flags with their values, everything else), each in command-line order."""
    runtime, rest = [], []
    tokens = list(args)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not is_runtime_flag(token):
            rest.append(token)
            continue
        runtime.append(token)
        if i < len(tokens) and not tokens[i].startswith("-"):
            runtime.append(tokens[i])
            i += 1
    return runtime, rest


def note_ignored(runtime: Sequence[str]) -> None:
    """Debug-log each runtime flag FFConfig does not read, with its value."""
    known = {name for flag in config.FLAGS for name in flag.names}
    for i, token in enumerate(runtime):
        if not is_runtime_flag(token) or token in known:
            continue
        value = runtime[i + 1] if i + 1 < len(runtime) and not is_runtime_flag(
            runtime[i + 1]) else ""
        log.debug("ignoring runtime flag %s: it has no meaning on Dask", f"{token} {value}".strip())


def quiet_when_stdout_closes(command: Callable[[list[str] | None], int],
                             argv: Sequence[str] | None) -> int:
    """`command(argv)`'s status (an entry point's body), or `CLOSED_PIPE_STATUS` with nothing
    printed when its standard output, a pipe, closes under it (`| head -1`). Python's recipe
    (the signal module's note on SIGPIPE): stdout is pointed at os.devnull, so that the
    interpreter's last flush at exit does not fail again. Output is flushed here, inside the
    guard, also when the command ends by SystemExit (a script's sys.exit). A BrokenPipeError
    while stdout is not a pipe is not stdout's: it propagates."""
    try:
        try:
            status = command(None if argv is None else list(argv))
        except SystemExit:
            sys.stdout.flush()
            raise
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        descriptor = _stdout_pipe()
        if descriptor is None:
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, descriptor)
        os.close(devnull)
        return CLOSED_PIPE_STATUS


def _stdout_pipe() -> int | None:
    """The descriptor of standard output if it is a pipe or a socket (what can close under a
    writer), else None."""
    try:
        descriptor = sys.stdout.fileno()
        mode = os.fstat(descriptor).st_mode
    except (AttributeError, ValueError, OSError):  # replaced by an object without a file
        return None
    return descriptor if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None


def main(argv: Sequence[str] | None = None) -> int:
    """The `flexflow_python` command (`python -m flexflow`)."""
    return quiet_when_stdout_closes(launch, argv)


def launch(argv: list[str] | None) -> int:
    """Run what the command line (`sys.argv[1:]` when None) names: a script, a command, or an
    interactive interpreter."""
    args = list(sys.argv[1:] if argv is None else argv)
    _configure_logging()
    runtime, rest = split_runtime_flags(args)
    while rest and rest[0] in IGNORED_OPTIONS:
        log.debug("ignoring launcher option %s", rest.pop(0))
    note_ignored(runtime)
    config.set_runtime_args(runtime)
    if rest[:1] == ["--help"]:
        print(USAGE)
    if rest[:1] in (["--help"], ["--version"]):
        config.exit_if_asked(rest[:1])
    if rest[:1] == ["-c"]:
        if len(rest) < 2:
            raise SystemExit(f"flexflow_python: -c needs a command\n{USAGE}")
        sys.argv = ["-c", *rest[2:]]
        exec(compile(rest[1], "<string>", "exec"), {"__name__": "__main__"})
        return 0
    if not rest or rest[0] == "-":
        sys.argv = [""] + rest[1:]
        code.interact(local={"__name__": "__main__"})
        return 0
    script = Path(rest[0])
    if not script.is_file():
        raise SystemExit(f"flexflow_python: cannot open script {rest[0]!r}: no such file\n"
                         f"{USAGE}")
    sys.argv = [str(script), *rest[1:]]
    sys.path.insert(0, str(script.resolve().parent))
    runpy.run_path(str(script), run_name="__main__")
    return 0


def _configure_logging() -> None:
    level = os.environ.get("FLEXFLOW_LOG_LEVEL")
    if level:
        logging.basicConfig(level=level.upper(), format="%(name)s: %(message)s")
