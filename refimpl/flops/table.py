"""Rendering FLOP counts as the per-module table that FlopCounterMode prints.

Rows: each module (indented by its depth, ``ResNet.layer1`` is depth 2) with its total and
share of the global total, followed by one row per op family it ran. Modules deeper than
``depth`` are left out. A ``Global`` row leads only when some FLOPs ran outside every
module (otherwise a root module's row already says the same). Numbers use one unit for the
whole table, chosen from the global total (K, M, B, T: thousands, millions, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tabulate

SUFFIXES = ("", "K", "M", "B", "T")


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    label: str
    flops: int
    share: str


def unit_for(total: int) -> str:
    """The suffix for ``total``: 1.01B is shown as 1010M (one extra digit group)."""
    index = max(0, min(len(SUFFIXES) - 1, (len(str(total)) - 2) // 3))
    return SUFFIXES[index]


def with_unit(number: int, unit: str) -> str:
    return f"{number / 1000 ** SUFFIXES.index(unit):.3f}{unit}"


def percent(part: int, whole: int) -> str:
    return "0%" if whole == 0 else f"{part / whole:.2%}"


def module_rows(name: str, ops: dict[Any, int], indent: int, total: int) -> list[Row]:
    """The module's own row, then one row per op."""
    own = sum(ops.values())
    pad = " " * indent
    rows = [Row(pad + name, own, percent(own, total))]
    rows += [Row(f"{pad} - {op}", n, percent(n, total)) for op, n in ops.items()]
    return rows


def table_rows(counts: dict[str, dict[Any, int]], depth: int) -> list[Row]:
    """All rows, modules sorted by name, Global first when it holds un-attributed FLOPs."""
    total = sum(counts.get("Global", {}).values())
    rows: list[Row] = []
    subsumed = False
    for name in sorted(n for n in counts if n != "Global"):
        level = name.count(".") + 1
        if level > depth:
            continue
        subsumed |= sum(counts[name].values()) >= total
        rows += module_rows(name, counts[name], level - 1, total)
    if "Global" in counts and not subsumed:
        rows = [Row(" " + r.label, r.flops, r.share) for r in rows]
        rows = module_rows("Global", counts["Global"], 0, total) + rows
    return rows


def render(counts: dict[str, dict[Any, int]], depth: int) -> str:
    """The table as text (tabulate, columns Module / FLOP / % Total)."""

    total = sum(counts.get("Global", {}).values())
    unit = unit_for(total)
    rows = table_rows(counts, depth)
    values = [[r.label, with_unit(r.flops, unit), r.share] for r in rows] or \
        [["Global", "0", "0%"]]
    return tabulate.tabulate(values, headers=["Module", "FLOP", "% Total"],
                             colalign=("left", "right", "right"), preserve_whitespace=True)


def uncounted_line(uncounted: dict[Any, int]) -> str:
    """The line under the table naming the ops that ran with no formula (not declared free):
    ``""`` when there are none."""
    if not uncounted:
        return ""
    listed = ", ".join(f"{op} x{n}" for op, n in sorted(uncounted.items(), key=lambda i: str(i[0])))
    return f"Uncounted (no FLOP formula, not declared free): {listed}"
