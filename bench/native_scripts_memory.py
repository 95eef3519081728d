"""Peak resident memory of FlexFlow's native `resnet.py` and `inception.py` (r22.07), run
unchanged with FlexFlow's CI flags and `-b 16`, against this machine's 24 GB.

Each script builds its whole input array in NumPy before training (10000 CIFAR-10 images
resized to 3x229x229 or 3x299x299, float32: 6.3 GB and 10.7 GB) and hands it to a data loader,
which must not take a second copy of it. The scripts read CIFAR-10 with
`flexflow.keras.datasets.cifar10.load_data(10000)`; this bench writes a synthetic CIFAR-10 in
the python version's format (`cifar-10-batches-py/`, random pixels and labels) into a temporary
folder named by `FLEXFLOW_DATA_DIR`. A whole epoch is 625 iterations, hours on a CPU, so each
script runs until it has printed `--iterations` `[Metrics]` lines (one per training iteration)
or for `--timeout` seconds, whichever comes first, and its process group is then ended. The
resident memory of its process tree is sampled every 0.5 s (psutil); the main process's VmHWM
is read too, and the tree's resident memory as each `[Metrics]` line appears (growth from one
iteration to the next would show there). The time per iteration is that between the first and
the last `[Metrics]` line seen (to the 0.5 s of the sampling).

    python bench/native_scripts_memory.py FLEXFLOW/examples/python/native
        [--scripts resnet.py inception.py] [--iterations 3] [--timeout 900] [--threads 2]

FlexFlow's files are never part of this repository: pass the folder of a FlexFlow checkout's
native examples. PIL (`pip install pillow`) is needed by the scripts.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).parent))
from child_processes import end_group, end_groups_on_sigterm  # noqa: E402
from host_load import StealMeter, describe  # noqa: E402

CI_FLAGS = ["-ll:py", "1", "-ll:gpu", "1", "-ll:fsize", "3048", "-ll:zsize", "12192"]
BATCH = 16
SAMPLES = 10000  # the scripts' num_samples
IMAGE_SIDE = {"resnet.py": 229, "inception.py": 299}
LIMIT = 24e9
GB = 1e9
SAMPLE_S = 0.5


def write_cifar10(root: Path, seed: int = 0) -> Path:
    """A synthetic CIFAR-10 in the python version's layout under `root`; `root`."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"batch_label": name.encode(),
                 b"data": rng.integers(0, 256, (10000, 3072), dtype=np.uint8),
                 b"labels": [int(v) for v in rng.integers(0, 10, 10000)],
                 b"filenames": [f"{i}.png".encode() for i in range(10000)]}
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f, protocol=2)
    return root


def tree_rss(process: psutil.Process) -> int:
    """Resident bytes of `process` and all its descendants (0 for those gone meanwhile)."""
    total = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            pass
    return total


def vm_hwm(pid: int) -> int:
    """The peak resident bytes (VmHWM) of process `pid`, 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def metrics_times(log: Path, seen: list[float]) -> list[float]:
    """`seen` extended with now for each `[Metrics]` line `log` holds beyond len(seen)."""
    count = log.read_text(errors="replace").count("[Metrics]")
    return seen + [time.monotonic()] * (count - len(seen))


def run_script(script: Path, env: dict, iterations: int, timeout_s: float, log: Path) -> dict:
    """Run `script` with the CI flags until it printed `iterations` [Metrics] lines, exited
    or ran `timeout_s`; its peak figures."""
    command = ["flexflow_python", script.name, *CI_FLAGS, "-b", str(BATCH)]
    with open(log, "w") as output:
        child = subprocess.Popen(command, cwd=script.parent, env=env, stdout=output,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    process = psutil.Process(child.pid)
    start, peak, hwm, seen, at_lines = time.monotonic(), 0, 0, [], []
    try:
        while (child.poll() is None and len(seen) < iterations
               and time.monotonic() - start < timeout_s):
            rss = tree_rss(process)
            peak, hwm = max(peak, rss), max(hwm, vm_hwm(child.pid))
            count, seen = len(seen), metrics_times(log, seen)
            at_lines += [rss] * (len(seen) - count)
            time.sleep(SAMPLE_S)
        exited = child.poll()  # None: stopped here (its iterations ran, or its time was up)
    finally:
        end_group(child)
    step = (seen[-1] - seen[0]) / (len(seen) - 1) if len(seen) > 1 else None
    return {"command": " ".join(command), "peak": peak, "hwm": hwm, "iterations": len(seen),
            "step_s": step, "at_lines": at_lines, "seconds": time.monotonic() - start,
            "exit": exited}


def report(script: str, figures: dict, log: Path) -> None:
    side = IMAGE_SIDE.get(script, 0)
    array = SAMPLES * 3 * side * side * 4
    step = "n/a" if figures["step_s"] is None else f"{figures['step_s']:.1f} s"
    print(f"{script}: peak tree RSS {figures['peak'] / GB:.2f} GB "
          f"({100 * figures['peak'] / LIMIT:.0f}% of {LIMIT / GB:.0f} GB, "
          f"{figures['peak'] / array:.2f}x its {array / GB:.2f} GB input array), "
          f"VmHWM {figures['hwm'] / GB:.2f} GB; {figures['iterations']} iteration(s) in "
          f"{figures['seconds']:.0f} s, {step} per iteration", flush=True)
    if figures["at_lines"]:
        print("  resident when the [Metrics] lines appeared: "
              + ", ".join(f"{rss / GB:.2f}" for rss in figures["at_lines"]) + " GB")
    if figures["exit"] is not None:
        print(f"  exited on its own (status {figures['exit']}); the end of its output:\n"
              + log.read_text(errors="replace")[-3000:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path, help="FlexFlow's examples/python/native")
    parser.add_argument("--scripts", nargs="+", default=list(IMAGE_SIDE))
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per script")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    end_groups_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="native-memory-") as temp:
        env = dict(os.environ, FLEXFLOW_DATA_DIR=str(write_cifar10(Path(temp))),
                   FLEXFLOW_DATA_VERIFY="0",  # synthetic batches differ from the published
                   **{name: str(args.threads) for name in
                      ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
        for script in args.scripts:
            steal = StealMeter()
            log = Path(temp) / f"{script}.log"
            figures = run_script((args.examples / script).resolve(), env, args.iterations,
                                 args.timeout, log)
            print(figures["command"])
            report(script, figures, log)
            print(f"  ({describe(steal.read())}, load averages "
                  f"{', '.join(f'{v:.1f}' for v in os.getloadavg())})", flush=True)


if __name__ == "__main__":
    main()
