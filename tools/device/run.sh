#!/usr/bin/env bash
# The one command for a lent GPU machine (the device tool's `run`, from the repository root, with
# `carry: [".device"]` after `python tools/device/wheelhouse.py` here):
#
#     bash tools/device/run.sh            # on the GPU machine
#     bash tools/device/run.sh --dry-run  # here, on a CPU: the same steps, nothing installed
#
# Each step's output goes to $OUT (a folder of its own when OUT is unset) as the step finishes,
# and steps.txt gets a line per step with its exit status, so a crash leaves what was done:
# versions.log, install.log, gpu_check.log and gpu_check.json (bench/gpu_check.py: every operator
# on both kernel paths, the cluster's workers' array module, the CNN's steps against PyTorch).
# Exits non-zero when a step failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
WHEELHOUSE="${WHEELHOUSE:-.device/wheelhouse}"
DRY_RUN=0
[ "${1:-}" = "--dry-run" ] && DRY_RUN=1
PYTHON="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 OUT
failed=0

step() {  # step NAME LIMIT_S COMMAND...: run it, its output to $OUT/NAME.log
    local name=$1 limit=$2 rc
    shift 2
    if [ "$(type -t "$1")" = function ]; then  # (timeout runs programs, not functions)
        "$@" >"$OUT/$name.log" 2>&1
    else
        timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    fi
    rc=$?
    echo "$name $rc" >>"$OUT/steps.txt"
    [ "$rc" -eq 0 ] || failed=1
    return "$rc"
}

versions() {
    "$PYTHON" - <<'PY' || return
import importlib.metadata as m, platform, sys
print("python", sys.version.split()[0], platform.machine())
for name in ("torch", "cupy-cuda13x", "cupy-cuda12x", "numpy", "dask", "distributed",
             "dask-cuda", "flexflow-dask"):
    try:
        print(name, m.version(name))
    except m.PackageNotFoundError:
        pass
PY
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
}

install() {
    "$PYTHON" -m pip install --no-index --find-links "$WHEELHOUSE" flexflow-dask dask-cuda
}

: >"$OUT/steps.txt"
step versions 60 versions
if [ "$DRY_RUN" -eq 0 ]; then
    step install 300 install || { echo "install failed: $OUT/install.log"; exit 1; }
fi
step gpu_check 480 "$PYTHON" bench/gpu_check.py
cat "$OUT/steps.txt"
exit "$failed"
