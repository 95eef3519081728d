"""Pictures and the `flexflow strategy show` command: the table matches the file (written by
hand here, in both formats); every picture written is a valid PNG or SVG of non-trivial size
that shows what it should (layer and device names, both strategies)."""

import struct
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from flexflow import cli
from flexflow.core import FFConfig, FFModel, SGDOptimizer
from flexflow.plots import PlotError, timeline
from flexflow.scheduler import actions as A
from flexflow.scheduler import machine as machine_module
from flexflow.scheduler.simulator import Simulator
from flexflow.scheduler.strategy import StrategyError
from flexflow.scheduler.taskgraph import TaskKey

from .run import TINY_MLP, launch
from ..search.helpers import TWO_GPUS_FILE as MACHINE

# Dense_100 split by features over devices 0-1, Dense_101 by the batch on 1 then 0; FlexFlow's
# text format lists degrees last dim first.
TEXT_STRATEGY = ("3\nDense_100\n0\n2\n2\t1\t\n2\n0\t1\t\nDense_101\n0\n2\n1\t2\t\n2\n1\t0\t\n"
                 "Softmax_102\n0\n2\n1\t2\t\n2\n0\t1\t\n")
JSON_STRATEGY = ('{"layers": {"Softmax_102": {"degrees": [2, 1], "devices": [0, 1]}, '
                 '"Dense_100": {"degrees": [1, 2], "devices": [0, 1]}, '
                 '"Dense_101": {"degrees": [2, 1], "devices": [1, 0]}}}')
TABLE = """\
layer        degrees (batch first)  parts  devices
Dense_100    1 x 2                  2      0-1
Dense_101    2 x 1                  2      1,0
Softmax_102  2 x 1                  2      0-1"""


def assert_valid_png(path, min_bytes=5000) -> None:
    data = path.read_bytes()
    assert len(data) >= min_bytes, f"{path}: only {len(data)} bytes"
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 200 and height >= 150
    from matplotlib.image import imread

    pixels = imread(path)
    assert pixels.shape[:2] == (height, width)
    assert pixels.reshape(-1, pixels.shape[-1]).std(axis=0).max() > 0.05  # not blank


def svg_texts(path, min_bytes=5000) -> str:
    """Parse an SVG (fails unless well-formed) and return all its text."""
    assert path.stat().st_size >= min_bytes
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.get("width") and root.get("height")
    return " ".join(t for element in root.iter() for t in (element.text,) if t)


@pytest.fixture(params=["text", "json"])
def strategy_path(request, tmp_path):
    path = tmp_path / ("strategy.txt" if request.param == "text" else "strategy.json")
    path.write_text(TEXT_STRATEGY if request.param == "text" else JSON_STRATEGY)
    return path


def test_strategy_show_prints_the_table(strategy_path, capsys):
    assert cli.main(["strategy", "show", str(strategy_path)]) == 0
    assert capsys.readouterr().out.rstrip() == TABLE


def test_device_ranges():
    assert cli.device_ranges((0, 1, 2, 3, 6, 8, 9)) == "0-3,6,8-9"
    assert cli.device_ranges((1, 0)) == "1,0"


def test_strategy_show_plot_needs_the_model(strategy_path, tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(SystemExit, match="add --model SCRIPT"):
        cli.main(["strategy", "show", str(strategy_path), "--plot", str(tmp_path / "s.png")])


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_strategy_show_draws_the_layer_graph(tmp_path, suffix, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "strategy.txt"
    path.write_text(TEXT_STRATEGY)
    picture = tmp_path / f"graph{suffix}"
    cli.main(["strategy", "show", str(path), "--plot", str(picture), "--model", str(TINY_MLP),
              "-b", "8"])
    assert f"drew {path}" in capsys.readouterr().out
    if suffix == ".png":
        assert_valid_png(picture)
    else:
        texts = svg_texts(picture)
        for name in ("Dense_100", "Dense_101", "Softmax_102", "device 0", "device 1", "1x2"):
            assert name in texts


def test_strategy_that_does_not_fit_the_model_is_rejected(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "other.txt"
    path.write_text(TEXT_STRATEGY.replace("Dense_101", "Conv2D_101"))
    with pytest.raises(StrategyError, match="other.txt"):
        cli.main(["strategy", "show", str(path), "--plot", str(tmp_path / "s.png"), "--model",
                  str(TINY_MLP), "-b", "8"])


def test_search_plot_and_timeline(tmp_path):
    pytest.importorskip("matplotlib")
    (tmp_path / "machine.txt").write_text(MACHINE)
    (tmp_path / "strategy.txt").write_text(TEXT_STRATEGY)  # a candidate besides data parallel
    result = launch(TINY_MLP, "-ll:py", "1", "-ll:gpu", "2", "--in-process", "-b", "8",
                    "--budget", "50", "--enable-parameter-parallel", "--machine-model-version",
                    "1", "--machine-model-file", "machine.txt", "--search-plot", "search.png",
                    "--timeline", "timeline.svg", "--import", "strategy.txt", cwd=tmp_path)
    assert "Search trace drawn in search.png" in result.stdout
    assert_valid_png(tmp_path / "search.png")
    texts = svg_texts(tmp_path / "timeline.svg")
    for label in ("device 0", "device 1", "the strategy used", "data parallel", "forward",
                  "backward", "ms per iteration"):
        assert label in texts
    # each group is labelled with its first layer (the first groups begin with the batch load)
    assert "Dense_100" in texts and "input0" not in texts


@pytest.mark.parametrize("flag", ["--timeline", "--search-plot"])
def test_picture_flags_are_checked_before_any_work(flag, tmp_path):
    ff = FFModel(FFConfig(argv=[flag, str(tmp_path / "picture.jpg"), "--budget", "5",
                                "-b", "8"]))
    ff.softmax(ff.dense(ff.create_tensor([8, 4]), 2))
    with pytest.raises(PlotError, match=f"{flag} .*picture.jpg: pictures are written as .png"):
        ff.compile(optimizer=SGDOptimizer(ff, 0.1))


def hand_made_simulation():
    """One fused task (1 ms of overhead, a forward of 2 ms, a send of 0.5 ms) on device 1 and a
    transfer on a link (drawn when the simulator reports `transfers`)."""
    forward = A.Forward(0, 0, (), (), ())
    tasks = (SimpleNamespace(action=forward, key=TaskKey("input0", "fwd", 0, "load")),
             SimpleNamespace(action=A.SendPartial(0, "f", 0, 1),
                             key=TaskKey("Dense_100", "fwd", 0, "send")))
    plan = SimpleNamespace(device=1, tasks=tasks, task_ms=(2.0, 0.5))
    return SimpleNamespace(plans=[plan], starts=[10.0], ends=[13.5], time=14.0,
                           transfers=[("nic-out0", 13.5, 15.0)])


def test_timeline_bars_follow_the_simulated_tasks_and_transfers():
    bars = timeline.bars(hand_made_simulation())
    assert [(b.row, b.start, b.end, b.phase) for b in bars] == [
        ("device 1", 10.0, 13.5, "overhead"), ("device 1", 11.0, 13.0, "forward"),
        ("device 1", 13.0, 13.5, "send"), ("link nic-out0", 13.5, 15.0, "transfer")]


def test_timeline_draws_link_rows(tmp_path):
    pytest.importorskip("matplotlib")
    timeline.draw(str(tmp_path / "t.svg"), [("hand-made", hand_made_simulation())])
    texts = svg_texts(tmp_path / "t.svg", min_bytes=2000)
    assert "link nic-out0" in texts and "hand-made: 14.00 ms per iteration" in texts
    assert "Dense_100" in texts  # the group's label: its first task of a layer, not the load


def test_each_timeline_panel_has_its_own_time_axis():
    pytest.importorskip("matplotlib")
    fast, slow = hand_made_simulation(), hand_made_simulation()
    slow.time, slow.ends = 140.0, [135.0]
    slow.starts, slow.plans[0].task_ms = [10.0], (120.0, 5.0)
    axes = timeline.figure_of([("searched", fast), ("data parallel", slow)]).axes
    assert axes[0].get_xlim() == (0.0, 15.0) and axes[1].get_xlim() == (0.0, 140.0)


def test_timeline_of_a_two_device_model_has_a_row_per_link(tmp_path):
    """Data parallelism on 2 devices: the gradients and weights cross the NVLinks and the
    batches come over PCIe; each booking lies between its sender's end and its receiver's
    start, and each link gets its row in the picture."""
    pytest.importorskip("matplotlib")
    (tmp_path / "machine.txt").write_text(MACHINE)
    picture = tmp_path / "timeline.png"
    ff = FFModel(FFConfig(argv=["-ll:gpu", "2", "--in-process", "-b", "8",
                                "--machine-model-version", "1", "--machine-model-file",
                                str(tmp_path / "machine.txt"), "--timeline", str(picture)]))
    ff.softmax(ff.dense(ff.dense(ff.create_tensor([8, 16]), 32), 4))
    ff.compile(optimizer=SGDOptimizer(ff, 0.1))
    assert_valid_png(picture)
    machine = machine_module.read(str(tmp_path / "machine.txt"))
    simulation = Simulator(ff.graph, ff.objective, machine).simulate_full(
        ff.strategy, record_transfers=True)
    plans = simulation.plans
    expected = {resource for i, plan in enumerate(plans) for j in plan.receive_from
                for hop in machine.route(plans[j].device, plan.device)
                for resource in hop.resources}
    expected |= {resource for plan in plans if plan.feeds
                 for hop in machine.host_routes[plan.device] for resource in hop.resources}
    assert {"nvlink0-1", "nvlink1-0", "pci-to-dev0", "pci-to-dev1"} <= expected
    assert {t.resource for t in simulation.transfers} == expected
    for t in simulation.transfers:
        assert 0 < t.start < t.end <= max(simulation.starts)
        assert any(start >= t.end for start in simulation.starts)
    rows = {bar.row for bar in timeline.bars(simulation)}
    assert {f"link {resource}" for resource in expected} <= rows
