"""Hostile input: mutated `.ff` (and `.ff.npz` weights), ONNX, strategy, machine-model and
checkpoint files give either success or the reader's documented error (docs/errors.md), never
another exception, a hang or a crash; malformed flag values name the flag; oversized shapes are
refused before allocation; no file runs code.

Each valid file (seeds.py, written by our own exporters) is mutated many times with a seeded
`Mutator` (mutate.py), written to disk and read the way a run reads it; what reads without error
is used up to building the model (layers built, strategy checked against the model, machine
used by the simulator, checkpoint loaded into its model). Each case runs in a thread with a time
limit, so a hang fails the test instead of stalling it; failures are listed with the case number
(the seed) and the mutation, which reproduce them.
"""

from __future__ import annotations

import io
import re
import threading
import tracemalloc
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from numpy.lib import format as npy_format

from flexflow.config import FFConfig, FlagError
from flexflow.core import CheckpointError, FFModel, ShapeError
from flexflow.onnx import ONNXImportError
from flexflow.onnx.model import ONNXModel
from flexflow.scheduler import machine as machine_module
from flexflow.scheduler import strategy_file
from flexflow.scheduler.machine import MachineError
from flexflow.scheduler.simulator import Simulator
from flexflow.scheduler.strategy import StrategyError, data_parallel_strategy
from flexflow.torch.ir import ConversionError
from flexflow.torch.model import PyTorchModel

from . import seeds as S
from .mutate import Mutator, mutate_archive, mutate_onnx

CASE_TIMEOUT_S = 20.0  # one file; far above the slowest valid one (about 0.1 s)
SHOWN = 10  # failures listed
HANG = "hang"


@dataclass
class Kind:
    """One kind of file: its seeds, how a run uses the file, and the one exception its reader
    documents."""

    seeds: Callable[[Path], list[S.Seed]]
    use: Callable[[Path, S.Seed], None]
    error: type[Exception]
    cases: int
    mutate_extra: bool = False  # also mutate the files that go with the main one


# ---- how each kind of file is used --------------------------------------------------------------
def use_ff(path: Path, seed: S.Seed) -> None:
    ffmodel = FFModel(FFConfig(argv=[], batch_size=seed.inputs[0][0][0]))
    PyTorchModel.file_to_ff(path, ffmodel, S.input_tensors(ffmodel, seed))


def use_onnx(path: Path, seed: S.Seed) -> None:
    model = ONNXModel(str(path))
    ffmodel = FFModel(FFConfig(argv=[], batch_size=seed.inputs[0][0][0]))
    model.apply(ffmodel, dict(zip(model.inputs, S.input_tensors(ffmodel, seed))))


def use_strategy(path: Path, seed: S.Seed) -> None:
    strategy_file.read(str(path))
    ffmodel = S.strategy_model(seed.name.split("-")[0])
    strategy_file.load(str(path), ffmodel.graph, S.NUM_DEVICES)


def use_checkpoint(path: Path, seed: S.Seed) -> None:
    S.checkpoint_model(seed.name)[0].load_checkpoint(path)


def use_machine(path: Path, seed: S.Seed) -> None:
    machine = machine_module.read(str(path))
    machine.describe()
    graph = S.strategy_model("mlp").graph
    Simulator(graph, None, machine).simulate_full(
        data_parallel_strategy(graph, min(machine.num_devices, S.NUM_DEVICES)))


KINDS = {
    "ff": Kind(S.ff_seeds, use_ff, ConversionError, 320, mutate_extra=True),
    "onnx": Kind(lambda folder: S.onnx_seeds(), use_onnx, ONNXImportError, 260),
    "strategy": Kind(lambda folder: S.strategy_seeds(), use_strategy, StrategyError, 220),
    "machine": Kind(S.machine_seeds, use_machine, MachineError, 220),
    "checkpoint": Kind(S.checkpoint_seeds, use_checkpoint, CheckpointError, 200),
}
MUTATIONS = {".onnx": mutate_onnx, ".json": Mutator.json, ".ckpt": mutate_archive,
             ".npz": mutate_archive}  # other suffixes: Mutator.text


# ---- the run ------------------------------------------------------------------------------------
def outcome(use: Callable[[], None]) -> BaseException | None | str:
    """What `use()` raised (None when it succeeded), or HANG past the time limit."""
    result: list = []

    def run():
        try:
            use()
            result.append(None)
        except BaseException as error:  # noqa: BLE001 (the test sorts them)
            result.append(error)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(CASE_TIMEOUT_S)
    return result[0] if result else HANG


def mutated_files(kind: Kind, seed: S.Seed, mutator: Mutator) -> tuple[dict[str, bytes], str]:
    """The files of one case (suffix -> bytes, "" for the main one) and what was changed."""
    files = {"": seed.main, **seed.extra}
    target = ""
    if kind.mutate_extra and seed.extra and mutator.rng.random() < 0.2:
        target = mutator.rng.choice(list(seed.extra))
    suffix = target or seed.suffix
    files[target], what = MUTATIONS.get(suffix, Mutator.text)(mutator, files[target])
    return files, f"{seed.name}{target}: {what}"


@pytest.mark.parametrize("name", list(KINDS))
def test_mutated_files_give_success_or_the_documented_error(name, tmp_path):
    kind = KINDS[name]
    seeds = kind.seeds(tmp_path)
    failures, errors = [], 0
    for case in range(kind.cases):
        mutator = Mutator(case)
        seed = seeds[case % len(seeds)]
        files, what = mutated_files(kind, seed, mutator)
        path = tmp_path / f"case{seed.suffix}"
        for suffix, data in files.items():
            Path(str(path) + suffix).write_bytes(data)
        result = outcome(lambda: kind.use(path, seed))
        if isinstance(result, kind.error) and path.name in str(result):
            errors += 1
        elif isinstance(result, kind.error):
            failures.append(f"case {case} ({what}): the error does not name the file: {result}")
        elif result == HANG:
            failures.append(f"case {case} ({what}): no answer after {CASE_TIMEOUT_S} s")
            break  # the hung thread goes on running; later cases would only be slowed by it
        elif result is not None:
            failures.append(f"case {case} ({what}): "
                            + "".join(traceback.format_exception(result)[-3:]))
    assert not failures, f"{len(failures)} of {kind.cases} {name} cases:\n" + "\n".join(
        failures[:SHOWN])
    assert 0 < errors < kind.cases  # the mutations reach both outcomes


# ---- targeted cases -----------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["-b", "abc"], ["--budget", "-5"], ["-ll:gpu", "0"],
                                  ["--alpha", "x"], ["--alpha", "nan"], ["--lr", "inf"],
                                  ["--lr", "-1"], ["-ll:fsize", "infg"], ["-ll:fsize", "-5g"], ["--seed", "-1"],
                                  ["-e", "1e3"], ["-b", "9" * 5000], ["--epochs"]],
                         ids=lambda argv: " ".join(argv)[:24])
def test_malformed_flag_values_name_the_flag(argv):
    with pytest.raises(FlagError, match=re.escape(argv[0])):
        FFConfig(argv=argv)


def test_a_huge_batch_size_is_refused_before_allocation():
    ffmodel = FFModel(FFConfig(argv=["-b", str(1 << 40)]))
    with pytest.raises(ShapeError, match="elements"):
        ffmodel.create_tensor([ffmodel.ffconfig.batch_size, 784])


def peak_allocation(use: Callable[[], None], error: type[Exception], match: str) -> int:
    """Bytes allocated at the peak while `use()` raises `error` matching `match`."""
    tracemalloc.start()
    try:
        with pytest.raises(error, match=match):
            use()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_oversized_ff_shape_is_refused_before_allocation(tmp_path):
    path = tmp_path / "expand.ff"
    path.write_text(f"x; ; expand,; INPUT\nexpand; x,; output,; EXPAND; {1 << 30}; {1 << 30}\n"
                    "output; expand,; ; OUTPUT\n")
    seed = S.Seed("expand", b"", ".ff", inputs=[((1, 1), np.float32)])
    peak = peak_allocation(lambda: use_ff(path, seed), ConversionError, "expand.ff.*elements")
    assert peak < 64 << 20


def test_weights_declaring_more_than_they_hold_are_refused_before_allocation(tmp_path):
    """An `.npy` member whose header declares 2**28 floats (1 GiB) but holds 16 bytes: refused
    from its header, before numpy allocates what it declares."""
    path = tmp_path / "model.ff"
    path.write_text("x; ; linear,; INPUT\nlinear; x,; output,; LINEAR; 4; 10; 1\n"
                    "output; linear,; ; OUTPUT\n")
    member = io.BytesIO()
    npy_format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False,
                                               "shape": (1 << 14, 1 << 14)})
    with zipfile.ZipFile(str(path) + ".npz", "w") as archive:
        archive.writestr("linear/weight.npy", member.getvalue() + bytes(16))
    seed = S.Seed("linear", b"", ".ff", inputs=[((2, 4), np.float32)])
    peak = peak_allocation(lambda: use_ff(path, seed), ConversionError, "model.ff.npz.*declares")
    assert peak < 64 << 20


@pytest.mark.parametrize("size, op, operand", [("shape; 1", "POW", 10 ** 9),
                                               ("shape", "SCALAR_MULTIPLY", 10 ** 12)])
def test_ff_arithmetic_on_sizes_is_bounded(tmp_path, size, op, operand):
    """`x.size(1) ** 10**9` or `x.shape * 10**12` would take hours or all the memory."""
    path = tmp_path / "sizes.ff"
    path.write_text(f"x; ; size,output,; INPUT\nsize; x,; op,; GETATTR; {size}\n"
                    f"op; size,; ; {op}; {operand}\noutput; x,; ; OUTPUT\n")
    seed = S.Seed("sizes", b"", ".ff", inputs=[((2, 4), np.float32)])
    result = outcome(lambda: use_ff(path, seed))
    assert isinstance(result, ConversionError) and "sizes.ff" in str(result), result


def test_files_never_run_code(tmp_path):
    """A `.ff` parameter is a literal or a string, never evaluated; a pickled (object) array in
    the weights is refused, never unpickled."""
    marker = tmp_path / "ran"
    path = tmp_path / "model.ff"
    path.write_text("x; ; linear,; INPUT\n"
                    f"linear; x,; output,; LINEAR; __import__('pathlib').Path('{marker}').touch()"
                    "; 10; 1\noutput; linear,; ; OUTPUT\n")
    seed = S.Seed("code", b"", ".ff", inputs=[((2, 4), np.float32)])
    with pytest.raises(ConversionError, match="model.ff"):
        use_ff(path, seed)
    with open(str(path) + ".npz", "wb") as file:
        np.savez(file, **{"linear/weight": np.array([Touch(marker)], dtype=object)})
    with pytest.raises(ConversionError, match="model.ff.npz"):
        use_ff(path, seed)
    assert not marker.exists()


class Touch:
    """Unpickling this creates a file: what a file that runs code would do."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


@pytest.mark.parametrize("text, message", [
    pytest.param("num_nodes = 1e9\nnum_sockets_per_node = 1\nnum_gpus_per_socket = 4\n",
                 "at most 1024", id="huge"),
    pytest.param("num_nodes = 2.5\nnum_sockets_per_node = 1\nnum_gpus_per_socket = 4\n",
                 "whole number", id="fraction"),
    pytest.param("num_nodes = nan\n", "line 1: num_nodes must be a number", id="nan"),
])
def test_machine_files_describing_impossible_machines_are_refused(tmp_path, text, message):
    path = tmp_path / "machine.txt"
    path.write_text(text)
    with pytest.raises(MachineError, match=f"machine.txt.*{message}"):
        machine_module.read(str(path))


@pytest.mark.parametrize("text, message", [
    pytest.param('{"layers": {"Dense_100": {"degrees": [65536, 65536], "devices": []}}}',
                 "partitions", id="json-partitions"),
    pytest.param('{"layers": {"Dense_100": {"degrees": [1.5, 2], "devices": [0, 1]}}}',
                 "integer lists", id="json-float-degree"),
    pytest.param('{"layers": ' + "[" * 100_000, "not valid JSON", id="json-deep"),
    pytest.param("1\nDense_100\n0\n2\n65536\t65536\t\n0\n", "partitions",
                 id="text-partitions"),
])
def test_strategy_files_with_absurd_sizes_are_refused(tmp_path, text, message):
    path = tmp_path / "strategy.txt"
    path.write_text(text)
    with pytest.raises(StrategyError, match=f"strategy.txt.*{message}"):
        strategy_file.read(str(path))
