"""``refimpl pareto``: the curve's CSV and PNG, and its argument errors."""

from __future__ import annotations

import csv

import pytest

from refimpl.cli import main


def test_pareto_writes_csv_and_png(tmp_path):
    prefix = tmp_path / "curve"
    assert main(["pareto", "mlp", "--points", "3", "--out", str(prefix)]) == 0
    rows = list(csv.DictReader(prefix.with_suffix(".csv").read_text().splitlines()))
    assert [float(r["budget"]) for r in rows] == [0.0, 0.5, 1.0]
    assert all(r["backend"] == "refimpl" for r in rows)
    saved = [int(r["saved_bytes"]) for r in rows]
    recompute = [int(r["recompute_flops"]) for r in rows]
    assert saved == sorted(saved) and recompute == sorted(recompute, reverse=True)
    assert saved[0] == 0 and recompute[-1] == 0 and recompute[0] > 0
    assert prefix.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pareto_rejects_bad_arguments(tmp_path, capsys):
    assert main(["pareto", "mlp", "--points", "1", "--out", str(tmp_path / "x")]) == 2
    assert "--points=1 must be at least 2" in capsys.readouterr().out
    assert main(["pareto", "mlp", "--solver", "magic", "--out", str(tmp_path / "x")]) == 2
    with pytest.raises(SystemExit):
        main(["pareto", "no-such-model"])
