"""Small hostile files, built here by code, that ask a reader for unbounded time or memory, and
the way a run reads each; `python -m tests.fuzz.attacks READER PATH` reads one in a process of
its own and prints how it ended (see `bounded_read`).

Each builder writes its file under a folder and returns the path. The files:

* ONNX: a `Loop` on constants with a trip count of 1e15 (a hang), a `Loop` doubling a constant
  29 times (2 GiB), three `ConstantOfShape` fills of 64, 64 and 700 MiB (each within the fold
  budget alone), one int64 fill of 1.6 GB (under the old bound of 2**30 elements).
* pickles: a "billion laughs" CIFAR batch (ten references to a list in each of nine nested
  lists), a batch whose data contains itself, and the same two as Reuters' object array `x`.
* archives: an `mnist.npz` zip bomb (four members of 300 MiB of zeros, deflated to 300 kB
  each) and one whose member's header declares a terabyte it does not hold.
* a checkpoint whose Adam learning rate is a 400-digit integer.
* machine models whose hop latency is 1e308 ms, bandwidth 1e-320, 0, inf or nan.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import resource
import signal
import struct
import sys
import time
import zlib
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

READ_SECONDS = 5  # a read still running then is killed (SIGALRM's default action)


# ---- ONNX ---------------------------------------------------------------------------------------
def _onnx_file(folder: Path, name: str, nodes, initializers: dict, outputs) -> Path:
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        nodes, name, [], [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                          for o in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = folder / f"{name}.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def _loop(folder: Path, name: str, trips: int, body_op: str) -> Path:
    """A Loop whose body passes `acc` through `body_op` (Identity: a hang; Concat with itself:
    doubling) `trips` times."""
    from onnx import TensorProto, helper
    step = (helper.make_node("Identity", ["acc"], ["acc_out"]) if body_op == "Identity" else
            helper.make_node("Concat", ["acc", "acc"], ["acc_out"], axis=0))
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]), step], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, None)])
    loop = helper.make_node("Loop", ["trips", "go", "start"], ["out"], name="grow", body=body)
    return _onnx_file(folder, name, [loop], {"trips": np.array(trips, np.int64),
                                             "go": np.array(True),
                                             "start": np.ones(1, np.float32)}, ["out"])


def loop_hang(folder: Path) -> Path:
    return _loop(folder, "loop_hang", 10 ** 15, "Identity")


def loop_growth(folder: Path) -> Path:
    return _loop(folder, "loop_growth", 29, "Concat")


def _fills(folder: Path, name: str, elements: list[int], dtype) -> Path:
    """ConstantOfShape nodes filling `elements[i]` elements of `dtype` each."""
    from onnx import helper, numpy_helper
    value = numpy_helper.from_array(np.zeros(1, dtype), "value")
    nodes = [helper.make_node("ConstantOfShape", [f"shape{i}"], [f"fill{i}"], name=f"fill{i}",
                              value=value) for i in range(len(elements))]
    shapes = {f"shape{i}": np.array([n], np.int64) for i, n in enumerate(elements)}
    return _onnx_file(folder, name, nodes, shapes, [f"fill{i}" for i in range(len(elements))])


def three_fills(folder: Path) -> Path:
    """64 MiB, 64 MiB and 700 MiB of float32: each fits the budget alone, not together."""
    return _fills(folder, "three_fills", [16 << 20, 16 << 20, 175 << 20], np.float32)


def wide_fill(folder: Path) -> Path:
    return _fills(folder, "wide_fill", [200_000_000], np.int64)


# ---- pickles ------------------------------------------------------------------------------------
def _laughs(levels: int = 9, width: int = 10) -> list:
    value: list = [0]
    for _ in range(levels):
        value = [value] * width
    return value


def _self_containing() -> list:
    value: list = []
    value.append(value)
    return value


def _cifar_batch(folder: Path, name: str, data) -> Path:
    path = folder / name
    path.write_bytes(pickle.dumps({b"data": data, b"labels": data}, protocol=2))
    return path


def cifar_laughs(folder: Path) -> Path:
    return _cifar_batch(folder, "laughs_batch", _laughs())


def cifar_cycle(folder: Path) -> Path:
    return _cifar_batch(folder, "cycle_batch", _self_containing())


def _reuters(folder: Path, sequence: list) -> Path:
    x = np.empty(10, dtype=object)
    for i in range(len(x)):
        x[i] = sequence  # one object, referenced ten times
    path = folder / "reuters.npz"
    np.savez(path, x=x, y=np.zeros(len(x), np.int64))
    return path


def reuters_laughs(folder: Path) -> Path:
    return _reuters(folder, _laughs(levels=8))


def reuters_cycle(folder: Path) -> Path:
    return _reuters(folder, _self_containing())


# ---- archives -----------------------------------------------------------------------------------
def _deflated_zeros(header: bytes, zeros_mib: int) -> tuple[bytes, int, int]:
    """(raw deflate stream, CRC-32, size) of `header` followed by `zeros_mib` MiB of zeros,
    from one compressed MiB repeated: after a full flush a deflate stream starts afresh."""
    chunk = bytes(1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(header) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(header)
    for _ in range(zeros_mib):
        crc = zlib.crc32(chunk, crc)
    stream = head + block * zeros_mib + compressor.flush(zlib.Z_FINISH)
    return stream, crc, len(header) + (zeros_mib << 20)


def _zip(members: dict[str, tuple[bytes, int, int]]) -> bytes:
    """A zip of already deflated members (name -> (stream, CRC-32, size)), sizes under 4 GiB."""
    out, directory = io.BytesIO(), io.BytesIO()
    for name, (stream, crc, size) in members.items():
        encoded, offset = name.encode(), out.tell()
        out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(stream),
                              size, len(encoded), 0) + encoded + stream)
        directory.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc,
                                    len(stream), size, len(encoded), 0, 0, 0, 0, 0, offset)
                        + encoded)
    start = out.tell()
    out.write(directory.getvalue())
    out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members),
                          len(directory.getvalue()), start, 0))
    return out.getvalue()


def _npy_header(shape: tuple, descr: str = "|u1") -> bytes:
    header = io.BytesIO()
    npy_format.write_array_header_1_0(header, {"descr": descr, "fortran_order": False,
                                               "shape": shape})
    return header.getvalue()


def mnist_bomb(folder: Path) -> Path:
    mib = 300
    member = _deflated_zeros(_npy_header((mib << 20,)), mib)
    path = folder / "mnist.npz"
    path.write_bytes(_zip({f"{key}.npy": member
                           for key in ("x_train", "y_train", "x_test", "y_test")}))
    return path


def mnist_declared(folder: Path) -> Path:
    member = _deflated_zeros(_npy_header((1 << 40,)), 1)
    path = folder / "mnist.npz"
    path.write_bytes(_zip({f"{key}.npy": member
                           for key in ("x_train", "y_train", "x_test", "y_test")}))
    return path


# ---- checkpoints and machine models -------------------------------------------------------------
def checkpoint_huge_rate(folder: Path) -> Path:
    from .seeds import checkpoint_model
    path = folder / "huge_rate.ckpt"
    checkpoint_model("adam")[0].save_checkpoint(path)
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    meta = json.loads(str(arrays.pop("__checkpoint__")))
    meta["optimizer"]["hyperparameters"]["alpha"] = 10 ** 400
    with open(path, "wb") as file:
        np.savez(file, __checkpoint__=np.array(json.dumps(meta)), **arrays)
    return path


MACHINE = ("num_nodes = 1\nnum_sockets_per_node = 1\nnum_gpus_per_socket = 2\n"
           "intra_socket_gpu_fb_mem_to_gpu_fb_mem = nvlink\n")


def machine_file(latency: str, bandwidth: str):
    def build(folder: Path) -> Path:
        path = folder / "machine.txt"
        path.write_text(MACHINE + f"nvlink_latency = {latency}\nnvlink_bandwidth = {bandwidth}\n")
        return path
    return build


def machine_json(field: str, value: float):
    def build(folder: Path) -> Path:
        from flexflow.scheduler import machine as machine_module
        data = machine_module.preset("h100-8").to_json()
        data["links"][1]["hops"][0][field] = value
        path = folder / "machine.json"
        path.write_text(json.dumps(data))  # inf and nan as JSON's Infinity and NaN
        return path
    return build


# ---- reading them -------------------------------------------------------------------------------
def read_onnx(path: str) -> None:
    from flexflow.core import FFConfig, FFModel
    from flexflow.onnx.model import ONNXModel
    ONNXModel(path).apply(FFModel(FFConfig(argv=[])), {})


def read_cifar_batch(path: str) -> None:
    from flexflow.keras.datasets.cifar import load_batch
    load_batch(path)


def read_dataset(path: str) -> None:
    """`load_data` of the data set the file is (mnist.npz or reuters.npz), found through
    FLEXFLOW_DATA_DIR, checksums off (the file differs from the published one on purpose)."""
    from flexflow.keras.datasets import mnist, reuters
    os.environ.update(FLEXFLOW_DATA_DIR=str(Path(path).parent), FLEXFLOW_DATA_VERIFY="0")
    {"mnist.npz": mnist, "reuters.npz": reuters}[Path(path).name].load_data()


def read_checkpoint(path: str) -> None:
    from .seeds import checkpoint_model
    checkpoint_model("adam")[0].load_checkpoint(path)


def read_machine(path: str) -> None:
    from flexflow.scheduler import machine as machine_module
    machine_module.read(path)


READERS = {f.__name__: f for f in (read_onnx, read_cifar_batch, read_dataset, read_checkpoint,
                                   read_machine)}


def bounded_read(reader: str, path: str) -> dict:
    """Run `READERS[reader](path)` in this process, killed after READ_SECONDS; how it ended:
    the exception's type names (its MRO) and message, the seconds it took, and how much the
    peak RSS grew from its start (bytes)."""
    read = READERS[reader]
    _warm(reader)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    signal.alarm(READ_SECONDS)
    start = time.perf_counter()
    error = None
    try:
        read(path)
    except BaseException as raised:  # noqa: BLE001 (reported to the test, which judges it)
        error = raised
    seconds = time.perf_counter() - start
    signal.alarm(0)
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    return {"error": [c.__name__ for c in type(error).__mro__] if error else None,
            "message": str(error)[:2000] if error else "", "seconds": seconds,
            "rss_growth": grown}


def _warm(reader: str) -> None:
    """Import what the reader uses, so that the measured read holds only the file's cost."""
    import flexflow.core  # noqa: F401
    import flexflow.keras.datasets  # noqa: F401
    import flexflow.onnx.model  # noqa: F401
    import flexflow.scheduler.machine  # noqa: F401
    if reader == "read_checkpoint":
        from .seeds import checkpoint_model
        checkpoint_model("adam")


if __name__ == "__main__":
    print(json.dumps(bounded_read(sys.argv[1], sys.argv[2])))
