"""The wheelhouse the lent GPU machine installs from, offline: what the GPU path needs beyond the
machine image's own packages (its Python 3.12 holds torch, CuPy, numpy, pandas, cuda-core,
nvidia-ml-py, msgpack, pyyaml, psutil and the rest of /work/.library/device/KINDS.md's list,
but no Dask), as CPython 3.12 manylinux x86-64 wheels, and this project's own wheel.

    python tools/device/wheelhouse.py [--out .device/wheelhouse]

It downloads from the package index (this machine's; the lent one reaches none) and refuses a
wheelhouse over `LIMIT_BYTES`, since the device tool carries 64 MiB with the working tree.
tools/device/run.sh installs it there with `pip install --no-index`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# not on the image; versions as the GPU extra's (pyproject.toml): dask-cuda 26.10 pins Dask
MISSING_ON_THE_IMAGE = ("dask==2026.7.1", "distributed==2026.7.1", "dask-cuda==26.10.*",
                        "rapids-dask-dependency==26.10.*", "bokeh<3.10", "xyzservices",
                        "tornado", "zict", "tblib", "locket", "partd", "cryptography", "cffi",
                        "pycparser")
TARGET = ("--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi",
          "abi3", "--abi", "none", "--platform", "manylinux_2_28_x86_64", "--platform",
          "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "--platform", "any")
LIMIT_BYTES = 48 << 20  # leaves the working tree the rest of the device tool's 64 MiB


def download(out: Path) -> None:
    """The missing packages' wheels for the target, without their dependencies (the image
    has those; an offline install that lacks one says which)."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--only-binary=:all:", *TARGET, "--dest", str(out), *MISSING_ON_THE_IMAGE],
                   check=True)


def project_wheel(out: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(out), str(ROOT)], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".device" / "wheelhouse")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.whl"):
        old.unlink()
    download(args.out)
    project_wheel(args.out)
    wheels = sorted(args.out.glob("*.whl"))
    total = sum(w.stat().st_size for w in wheels)
    for wheel in wheels:
        print(f"{wheel.stat().st_size / 1e6:7.2f} MB  {wheel.name}")
    print(f"{total / 1e6:7.2f} MB in {len(wheels)} wheels in {args.out}")
    if total > LIMIT_BYTES:
        print(f"over the {LIMIT_BYTES >> 20} MiB the device tool can carry beside the tree",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
