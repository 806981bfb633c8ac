"""``refimpl pareto``: the optimum, torch's plan and the knapsack side by side (CSV, PNG),
and its argument errors (checked before any work)."""

from __future__ import annotations

import csv

import pytest

from refimpl.cli import COMMANDS, main


def read(prefix):
    return list(csv.DictReader(prefix.with_suffix(".csv").read_text().splitlines()))


def test_pareto_draws_optimum_torch_and_knapsack(tmp_path):
    prefix = tmp_path / "curve"
    assert main(["pareto", "summary", "--points", "3", "--out", str(prefix)]) == 0
    rows = read(prefix)
    assert [r["plan"] for r in rows] == ["optimum"] * 3 + ["knapsack"] * 3 + ["torch"] * 3
    assert [float(r["budget"]) for r in rows[:3]] == [0.0, 0.5, 1.0]
    by = {(r["plan"], float(r["budget"])): (int(r["saved_bytes"]), float(r["recompute_flops"]))
          for r in rows}
    # the optimum at budget 0.5 recomputes only the cheap matmul; the knapsack both big ones
    assert by["optimum", 0.5][1] < by["knapsack", 0.5][1]
    for budget in (0.0, 0.5, 1.0):
        assert by["optimum", budget][1] <= by["knapsack", budget][1]
    assert prefix.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pareto_without_torch(tmp_path):
    prefix = tmp_path / "mlp"
    assert main(["pareto", "mlp", "--points", "2", "--compare", "none",
                 "--out", str(prefix)]) == 0
    assert {r["plan"] for r in read(prefix)} == {"optimum", "knapsack"}


def test_pareto_rejects_bad_arguments_before_any_work(tmp_path, capsys):
    assert main(["pareto", "mlp", "--points", "1", "--out", str(tmp_path / "x")]) == 2
    assert "--points=1 must be at least 2" in capsys.readouterr().err
    missing = tmp_path / "no" / "such" / "x"
    assert main(["pareto", "mlp", "--out", str(missing)]) == 2
    assert f"--out={missing}: folder {missing.parent} does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["pareto", "no-such-model"])


def test_pareto_lives_above_the_components():
    import pathlib

    import refimpl.partition

    assert COMMANDS["pareto"] == "refimpl.pareto"
    for path in pathlib.Path(refimpl.partition.__file__).parent.glob("*.py"):
        text = path.read_text()
        assert "refimpl.oracle" not in text and "refimpl.pareto" not in text, path.name


def test_plot_tells_the_curves_apart_and_labels_budgets(tmp_path, monkeypatch):
    """Each curve has its own marker and line style and is drawn apart from the others; the
    budgets are written on the points (coinciding budgets share one label); the budget-1.0
    note is on the figure."""
    import matplotlib.pyplot as plt

    from refimpl import pareto

    rows = [["optimum", 0.0, 0, 4e6], ["optimum", 0.5, 1024, 1e6], ["optimum", 1.0, 2048, 0.0],
            ["knapsack", 0.0, 0, 4e6], ["knapsack", 0.5, 0, 4e6], ["knapsack", 1.0, 2048, 0.0],
            ["torch", 0.0, 0, 4e6], ["torch", 0.5, 1024, 1e6], ["torch", 1.0, 2048, 0.0]]
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to inspect it
    pareto.plot(rows, tmp_path / "p.png", "t")
    (fig,) = figures
    ax = fig.axes[0]
    styles = {(line.get_marker(), line.get_linestyle()) for line in ax.lines}
    assert len(styles) == 3
    offsets = {tuple(line.get_transform().transform((0, 0))) for line in ax.lines}
    assert len(offsets) == 3  # drawn apart: no curve hides under another
    labels = sorted(t.get_text() for t in ax.texts)
    # optimum: 0, 0.5, 1; knapsack differs from the optimum at 0.5 only (at the 0.0 point,
    # whose label "0.5" it gets alone); torch coincides with the optimum everywhere.
    assert labels == ["0", "0.5", "0.5", "1"]
    assert any("budget 1.0" in t.get_text() for t in fig.texts)
