"""The launcher takes FlexFlow's command line unchanged: runtime flags are filtered as FlexFlow's
launcher filters them (reference 5.1) yet reach FFConfig, and the script runs as `__main__` with
its own folder importable, exactly as `python script.py` would run it; a reader that stops early
(`| head -1`) ends it, and the `flexflow` command, silently with status 141."""

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from flexflow import cli, config, launcher

from ..examples.runner import SINGLE_THREADED_BLAS
from .run import TINY_MLP, launch, step_losses

PROBE = textwrap.dedent("""
    import json, sys
    from flexflow.core import FFConfig
    import probe_helper  # beside this script
    cfg = FFConfig()
    json.dump({"name": __name__, "argv": sys.argv, "path0": sys.path[0],
               "helper": probe_helper.VALUE, "gpus": cfg.workers_per_node,
               "fsize": cfg.device_memory_mb, "zsize": cfg.zero_copy_memory_mb,
               "cpus": cfg.cpus_per_node, "util": cfg.utility_threads,
               "bgwork": cfg.background_threads, "batch": cfg.batch_size},
              open(sys.argv[-1], "w"))
""")


@pytest.fixture
def probe(tmp_path):
    """A script that records what it saw into the file named by its last argument; the
    interpreter state the launcher changes is restored afterwards."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    (tmp_path / "probe_helper.py").write_text("VALUE = 42\n")
    saved = sys.argv[:], sys.path[:], sys.modules.get("probe_helper")
    yield script
    sys.argv[:], sys.path[:] = saved[0], saved[1]
    sys.modules.pop("probe_helper", None)
    config.set_runtime_args([])


def run_probe(script, *args, before=()):
    seen = script.parent / "seen.json"
    assert launcher.main([*before, str(script), *args, str(seen)]) == 0
    return json.loads(seen.read_text())


@pytest.mark.parametrize("args, runtime, rest", [
    # each runtime flag takes the following token unless that starts with "-"
    (["-ll:py", "1", "-ll:gpu", "4", "-b", "64"], ["-ll:py", "1", "-ll:gpu", "4"], ["-b", "64"]),
    (["-lg:spy", "-b", "8"], ["-lg:spy"], ["-b", "8"]),
    (["-lg:prof", "2", "x.py", "-level", "gpu=2", "-logfile", "log_%.txt", "-hl:sched", "-1"],
     ["-lg:prof", "2", "-level", "gpu=2", "-logfile", "log_%.txt", "-hl:sched"], ["x.py", "-1"]),
    (["-realm:x", "-cuda:y", "1", "-numa:z", "-dm:memoize", "-bishop:a", "b", "--lr", "0.1"],
     ["-realm:x", "-cuda:y", "1", "-numa:z", "-dm:memoize", "-bishop:a", "b"], ["--lr", "0.1"]),
    (["-e", "5", "--export", "s.txt"], [], ["-e", "5", "--export", "s.txt"]),
])
def test_runtime_flags_are_split_off_as_flexflow_does(args, runtime, rest):
    assert launcher.split_runtime_flags(args) == (runtime, rest)


def test_script_runs_as_main_with_runtime_flags_reaching_ffconfig(probe):
    seen = run_probe(probe, "-ll:py", "1", "-ll:gpu", "4", "-ll:fsize", "3048", "-ll:zsize",
                     "12192", "-ll:cpu", "3", "-ll:util", "2", "-ll:bgwork", "5", "-b", "256",
                     "--my-flag", "x")
    assert seen["name"] == "__main__"
    assert seen["argv"][0] == str(probe)
    assert seen["argv"][1:-1] == ["-b", "256", "--my-flag", "x"]  # no runtime flags left
    assert seen["path0"] == str(probe.parent) and seen["helper"] == 42
    assert (seen["gpus"], seen["fsize"], seen["zsize"]) == (4, 3048, 12192)
    assert (seen["cpus"], seen["util"], seen["bgwork"], seen["batch"]) == (3, 2, 5, 256)


def test_launcher_options_and_unknown_runtime_flags_are_ignored_with_a_note(probe, caplog):
    with caplog.at_level(logging.DEBUG, logger="flexflow.launcher"):
        seen = run_probe(probe, "-lg:prof", "1", "-ll:dma", "2", "-ll:gpu", "2")
        seen_nocr = run_probe(probe, before=("--nocr", "--freeze-on-error", "--backtrace"))
    assert seen["gpus"] == 2 and seen_nocr["argv"][0] == str(probe)
    notes = caplog.text
    assert "-lg:prof 1" in notes and "-ll:dma 2" in notes and "--nocr" in notes
    assert "-ll:gpu" not in notes  # FFConfig reads it


def test_runtime_flags_do_not_leak_into_the_next_run(probe):
    run_probe(probe, "-ll:gpu", "4")
    assert run_probe(probe)["gpus"] == 0


def test_missing_script_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="cannot open script .*nothere.py"):
        launcher.main([str(tmp_path / "nothere.py"), "-ll:gpu", "1"])


def test_command_mode(tmp_path, capsys):
    saved = sys.argv[:]
    try:
        launcher.main(["-ll:gpu", "2", "-c", "from flexflow.core import FFConfig; import sys; "
                       "print(FFConfig().workers_per_node, sys.argv)", "-b", "4"])
    finally:
        sys.argv[:] = saved
        config.set_runtime_args([])
    assert capsys.readouterr().out.strip() == "2 ['-c', '-b', '4']"


def test_launcher_and_plain_python_train_alike():
    """`python -m flexflow script.py -ll:py 1 -ll:gpu 1 ...` and `python script.py ...` run the
    same training: identical losses, step by step."""
    launched = launch(TINY_MLP, "-ll:py", "1", "-ll:gpu", "1", "-ll:fsize", "2048", "-ll:zsize",
                      "12192", "-b", "8")
    plain = launch(TINY_MLP, "-b", "8", launcher=False)
    assert step_losses(launched) == step_losses(plain)
    assert "script argv: ['-b', '8']" in launched.stdout
    assert "workersPerNode(1)" in launched.stdout


# ---- a reader that stops early: `| head -1` -----------------------------------------------------
MANY_LINES = "for i in range(200000):\n    print('line', i)\n"  # more than a pipe holds


def big_strategy(tmp_path):
    """A strategy file whose table is longer than a pipe holds, and the table's first line."""
    from flexflow.scheduler import strategy_file
    from flexflow.scheduler.strategy import ParallelConfig

    path = tmp_path / "big.txt"
    strategy_file.save({f"Dense_{i}": ParallelConfig((2, 1), (0, 1)) for i in range(5000)},
                       str(path))
    return path, "layer       degrees (batch first)  parts  devices"


def through_head(command: list[str]) -> tuple[str, str, int]:
    """`command | head -1` through a real pipe: (what head printed, the command's stderr, the
    command's exit status)."""
    writer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, **SINGLE_THREADED_BLAS})
    head = subprocess.Popen(["head", "-1"], stdin=writer.stdout, stdout=subprocess.PIPE)
    writer.stdout.close()  # head alone reads the pipe
    first = head.communicate(timeout=60)[0]
    errors = writer.stderr.read()
    return first.decode(), errors.decode(), writer.wait(timeout=60)


def console_script(name: str) -> str:
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if found is None:
        pytest.skip(f"the {name} console script is not installed")
    return found


@pytest.mark.parametrize("entry", ["flexflow_python", "python -m flexflow", "flexflow",
                                   "python -m flexflow.cli"])
def test_a_reader_that_stops_early_ends_the_command_silently_with_status_141(entry, tmp_path):
    if entry in ("flexflow_python", "python -m flexflow"):
        script = tmp_path / "many_lines.py"
        script.write_text(MANY_LINES)
        args, expected = [str(script)], "line 0"
    else:
        path, expected = big_strategy(tmp_path)
        args = ["strategy", "show", str(path)]
    command = ([sys.executable, "-m", entry.split()[-1]] if entry.startswith("python") else
               [console_script(entry)])
    first, errors, status = through_head(command + args)
    assert first == expected + "\n"
    assert errors == "" and status == 141


@pytest.fixture
def closed_pipe():
    """A text stream on a pipe whose reader has gone (the test makes it sys.stdout: pytest's
    capture sets sys.stdout again between the fixtures and the test)."""
    read, write = os.pipe()
    os.close(read)
    stream = open(write, "w")
    yield stream
    with contextlib.suppress(BrokenPipeError):
        stream.close()


@pytest.mark.parametrize("ending", ["a write fails", "the last flush fails at sys.exit",
                                    "the launcher's script", "flexflow strategy show"])
def test_a_closed_stdout_gives_status_141_and_leads_stdout_to_devnull(ending, closed_pipe,
                                                                       tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stdout", closed_pipe)

    def command(argv):
        print("line\n" * 100000, end="")  # more than the buffer: written now
        return 0

    def exits(argv):
        print("the last line")  # buffered: written by the flush at the exit
        raise SystemExit(0)
    if ending == "the launcher's script":
        status = launcher.main(["-c", "print('line\\n' * 100000)"])
    elif ending == "flexflow strategy show":
        status = cli.main(["strategy", "show", str(big_strategy(tmp_path)[0])])
    else:
        status = launcher.quiet_when_stdout_closes(
            command if ending == "a write fails" else exits, [])
    assert status == launcher.CLOSED_PIPE_STATUS == 141
    print("more", file=closed_pipe)
    closed_pipe.flush()  # the interpreter's flush at exit: it cannot fail again
    assert os.path.samestat(os.fstat(closed_pipe.fileno()), os.stat(os.devnull))


def test_statuses_and_other_broken_pipes_pass_through(tmp_path, monkeypatch):
    assert launcher.quiet_when_stdout_closes(lambda argv: len(argv), ("a", "b")) == 2

    def broken(argv):
        raise BrokenPipeError("a pipe of the script's own")
    monkeypatch.setattr(sys, "stdout", open(tmp_path / "out.txt", "w"))  # not a pipe
    with pytest.raises(BrokenPipeError, match="of the script's own"):
        launcher.quiet_when_stdout_closes(broken, [])
