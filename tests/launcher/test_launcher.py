"""The launcher takes FlexFlow's command line unchanged: runtime flags are filtered as FlexFlow's
launcher filters them (reference 5.1) yet reach FFConfig, and the script runs as `__main__` with
its own folder importable, exactly as `python script.py` would run it."""

import json
import logging
import sys
import textwrap

import pytest

from flexflow import config, launcher

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
