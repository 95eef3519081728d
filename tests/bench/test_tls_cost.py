"""bench/tls_cost.py runs end to end with tiny settings and prints a cost for each way of
training."""

import sys
from pathlib import Path

BENCH = Path(__file__).parents[2] / "bench"


def test_tls_cost_prints_a_cost_per_way(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(sys, "argv", ["tls_cost.py", "--rounds", "1", "--steps", "2"])
    import tls_cost
    tls_cost.main()
    lines = [line for line in capsys.readouterr().out.splitlines() if "TLS costs" in line]
    assert [line.split(":")[0].strip() for line in lines] == ["train_step", "fit"]
