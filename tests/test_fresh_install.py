"""A plain `pip install .` (no extras) into a fresh virtual environment is enough for a flat
script (no `if __name__ == "__main__":` guard) to train to its end on `-ll:gpu 2`: whatever the
default path imports (TLS for the local cluster included) is a base dependency. Slow: it
installs numpy, dask, distributed and cryptography from the package index."""

import subprocess
import venv
from pathlib import Path

import numpy as np
import pytest

from .launcher.run import SCRIPTS
from .test_packaging import ROOT, UNREACHABLE


@pytest.mark.slow
def test_a_plain_install_trains_a_flat_script_on_two_devices(tmp_path):
    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(ROOT)],
                             capture_output=True, text=True, timeout=900)
    if install.returncode and any(text in install.stderr for text in UNREACHABLE):
        pytest.skip("no package index can be reached")
    assert install.returncode == 0, install.stderr[-3000:]
    weights = tmp_path / "weights.npy"
    run = subprocess.run([str(python), str(SCRIPTS / "flat_mlp.py"), "-ll:gpu", "2", "-b", "8",
                          "--out", str(weights)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "starting 2 CPU worker processes" in run.stdout
    assert "training ends" in run.stderr
    assert np.isfinite(np.load(weights)).all()
    where = subprocess.run([str(python), "-c", "import flexflow; print(flexflow.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True)
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv")  # not the source tree
