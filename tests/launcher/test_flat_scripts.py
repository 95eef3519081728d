"""Scripts with and without an `if __name__ == "__main__":` guard train once on `-ll:gpu 2`,
run with `python` and with `flexflow_python`: the local cluster's workers are started as
commands of their own and never run the user's script (scheduler/cluster.py)."""

import numpy as np
import pytest

from .run import SCRIPTS, launch

FLAT = SCRIPTS / "flat_mlp.py"


def guarded(tmp_path):
    """The flat script with its body under a `__main__` guard."""
    body = FLAT.read_text().split('print("training starts"', 1)
    lines = ('print("training starts"' + body[1]).splitlines()
    script = tmp_path / "guarded_mlp.py"
    script.write_text(body[0] + 'if __name__ == "__main__":\n'
                      + "\n".join("    " + line for line in lines) + "\n")
    (tmp_path / "tiny_data.py").write_text((SCRIPTS / "tiny_data.py").read_text())
    return script


@pytest.mark.parametrize("launcher", [False, True], ids=["python", "flexflow_python"])
@pytest.mark.parametrize("kind", ["flat", "guarded"])
def test_a_script_trains_once_on_two_devices_with_the_in_process_weights(tmp_path, launcher,
                                                                        kind):
    script = FLAT if kind == "flat" else guarded(tmp_path)
    reference = tmp_path / "reference.npy"
    launch(script, "-b", "8", "--out", reference, launcher=False)
    weights = tmp_path / "weights.npy"
    result = launch(script, "-ll:gpu", "2", "-b", "8", "--out", weights, launcher=launcher,
                    cwd=tmp_path)
    assert result.stdout.count("training starts") == 1
    assert result.stderr.count("training ends") == 1
    assert result.stderr.count("[Metrics]") == 2 * 6  # two epochs of 6 iterations, once
    assert "Traceback" not in result.stderr
    np.testing.assert_allclose(np.load(weights), np.load(reference), rtol=1e-4, atol=1e-6)
