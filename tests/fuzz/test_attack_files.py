"""Hostile files that ask a reader for unbounded time or memory (attacks.py builds them, each a
few hundred bytes to a megabyte) end in the reader's documented error, naming the file, within
5 s and with the process's peak RSS grown by less than 1 GB. Each is read in a fresh process
(`python -m tests.fuzz.attacks`), which measures its own peak RSS around the read and is killed
by an alarm if the read outlasts the 5 s, so a hang or a blow-up fails the test without taking
the test process with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from . import attacks as A

REPOSITORY = Path(__file__).resolve().parents[2]
MAX_SECONDS = A.READ_SECONDS
MAX_RSS_GROWTH = 1_000_000_000
START_TIMEOUT_S = 120  # the fresh process's imports, on a loaded machine

ATTACKS = {  # name: (builder, reader, the reader's documented error, words the message holds)
    "onnx Loop of 1e15 trips": (A.loop_hang, "read_onnx", "ONNXImportError", "control flow"),
    "onnx Loop doubling 29 times": (A.loop_growth, "read_onnx", "ONNXImportError",
                                    "control flow"),
    "onnx three fills sharing a budget": (A.three_fills, "read_onnx", "ONNXImportError",
                                          "node 'fill2' (ConstantOfShape)"),
    "onnx 1.6 GB int64 fill": (A.wide_fill, "read_onnx", "ONNXImportError", "bytes"),
    "cifar billion laughs": (A.cifar_laughs, "read_cifar_batch", "DatasetError",
                             "shared references"),
    "cifar self-reference": (A.cifar_cycle, "read_cifar_batch", "DatasetError", "itself"),
    "reuters billion laughs": (A.reuters_laughs, "read_dataset", "DatasetError",
                               "x.npy: the data would hold"),
    "reuters self-reference": (A.reuters_cycle, "read_dataset", "DatasetError", "itself"),
    "mnist zip bomb": (A.mnist_bomb, "read_dataset", "DatasetError", "uncompressed"),
    "mnist member declaring 1 TiB": (A.mnist_declared, "read_dataset", "DatasetError",
                                     "declares"),
    "checkpoint 400-digit learning rate": (A.checkpoint_huge_rate, "read_checkpoint",
                                           "CheckpointError", "hyper-parameter 'alpha'"),
    "machine latency 1e308": (A.machine_file("1e308", "20"), "read_machine", "MachineError",
                              "line 5: nvlink_latency"),
    "machine bandwidth 1e-320": (A.machine_file("0.001", "1e-320"), "read_machine",
                                 "MachineError", "line 6: nvlink_bandwidth"),
    "machine bandwidth 0": (A.machine_file("0.001", "0"), "read_machine", "MachineError",
                            "line 6: nvlink_bandwidth"),
    "machine json latency inf": (A.machine_json("latency_ms", float("inf")), "read_machine",
                                 "MachineError", "latency is inf ms"),
    "machine json bandwidth nan": (A.machine_json("bandwidth_gbs", float("nan")),
                                   "read_machine", "MachineError", "bandwidth is nan"),
    "machine json latency 1e308": (A.machine_json("latency_ms", 1e308), "read_machine",
                                   "MachineError", "hop 0: latency is 1e+308 ms"),
}


def read_in_a_fresh_process(reader: str, path: Path) -> dict:
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPOSITORY), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "tests.fuzz.attacks", reader, str(path)],
                          cwd=REPOSITORY, env=environment, capture_output=True, text=True,
                          timeout=START_TIMEOUT_S + MAX_SECONDS)
    assert done.returncode == 0, (f"the read ended with exit status {done.returncode} (a "
                                  f"negative one is a signal: the alarm after {MAX_SECONDS} s, "
                                  f"or the kernel's OOM killer)\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_file_ends_in_the_documented_error_in_bounded_time_and_memory(name, tmp_path):
    build, reader, error, words = ATTACKS[name]
    path = build(tmp_path)
    result = read_in_a_fresh_process(reader, path)
    assert result["error"] and error in result["error"], result
    assert str(path) in result["message"] and words in result["message"], result
    assert result["seconds"] < MAX_SECONDS, result
    assert result["rss_growth"] < MAX_RSS_GROWTH, result
