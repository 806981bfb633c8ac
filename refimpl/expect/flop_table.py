"""What a FlopCounterMode's ``get_table()`` must show for given counts, written from torch's
documented table (torch.utils.flop_counter), never from a counter's own renderer.

The table (columns ``Module``, ``FLOP``, ``% Total``; the first column left-aligned with its
leading spaces kept, the other two right-aligned) holds, for counts ``{name: {op: FLOPs}}``
whose ``"Global"`` entry is every FLOP counted and a table depth ``d``:

- modules in name order (plain string order), each module ``m`` whose level
  (``m.count(".") + 1``) is at most ``d``: first its own row, indented by ``level - 1``
  spaces, then one row per op in the order the counts list them, labelled
  ``<indent> - <op>``;
- a ``Global`` row (and its op rows), first, unless some shown module holds at least the
  global total (its row already says the same); when it is shown, every module row gains
  one more leading space;
- numbers in one unit for the whole table: the largest of ``""``, K, M, B, T (powers of
  1000) whose power ``p`` satisfies ``total >= 10 * 1000**p`` (at least two digits before
  the point), written with three decimals and the unit (``1234.500K``); with no unit (a
  total below 10,000) the column holds plain numbers, which the table (tabulate) shows in
  its number format: a whole number of FLOPs as that number (``1234``);
- a share is ``part / total`` as a percentage with two decimals (``12.50%``), ``0%`` when
  the total is 0;
- with no row at all, one row ``Global``, ``0``, ``0%``.

Invariant: :func:`expected_rows` is a pure function of the counts and the depth; it reads
no counter. :func:`table_rows` reads a rendered table back into the same (label, FLOP,
share) cells, by the column spans of its dashed separator line.
"""

from __future__ import annotations

from typing import Any

import torch

UNITS = ("", "K", "M", "B", "T")
GLOBAL = "Global"

Cell = tuple[str, str, str]


def unit_of(total: int) -> int:
    """The unit's power of 1000 for a table whose global total is ``total``."""
    power = 0
    while power + 1 < len(UNITS) and total >= 10 * 1000 ** (power + 1):
        power += 1
    return power


def in_unit(flops: int, power: int) -> str:
    """``flops`` as the table shows it in its unit (module docstring)."""
    if power == 0:
        return str(flops)
    return f"{flops / 1000 ** power:.3f}{UNITS[power]}"


def share(part: int, total: int) -> str:
    """``part`` as a percentage of ``total`` (two decimals), ``0%`` for a zero total."""
    return "0%" if total == 0 else f"{part / total * 100:.2f}%"


def _module_cells(name: str, ops: dict[Any, int], indent: str, total: int,
                  power: int) -> list[Cell]:
    own = sum(ops.values())
    cells = [(indent + name, in_unit(own, power), share(own, total))]
    cells += [(f"{indent} - {op}", in_unit(n, power), share(n, total)) for op, n in ops.items()]
    return cells


def expected_rows(counts: dict[str, dict[Any, int]], depth: int | None) -> list[Cell]:
    """The table's rows (label, FLOP, share) for ``counts`` shown to ``depth`` (None: every
    module), by the module docstring's rules."""
    total = sum(counts.get(GLOBAL, {}).values())
    power = unit_of(total)
    shown = [name for name in sorted(counts) if name != GLOBAL
             and (depth is None or name.count(".") + 1 <= depth)]
    global_row = GLOBAL in counts and all(sum(counts[n].values()) < total for n in shown)
    pad = " " if global_row else ""
    rows: list[Cell] = []
    if global_row:
        rows += _module_cells(GLOBAL, counts[GLOBAL], "", total, power)
    for name in shown:
        rows += _module_cells(name, counts[name], pad + " " * name.count("."), total, power)
    return rows or [(GLOBAL, "0", "0%")]


def table_rows(text: str) -> tuple[list[Cell], list[str]]:
    """The body rows of a rendered table as (label, FLOP, share) cells, and the lines after
    the table (refimpl's line of uncounted ops). Raises ValueError when ``text`` does not
    start with the header and its dashed separator."""
    lines = text.split("\n")
    if len(lines) < 2 or lines[0].split() != ["Module", "FLOP", "%", "Total"] or \
            set(lines[1]) - {"-", " "}:
        raise ValueError(f"not a FLOP table (header, dashed separator): {text!r}")
    spans, start = [], 0
    for part in lines[1].split(" "):
        if part:
            spans.append((start, start + len(part)))
        start += len(part) + 1
    if len(spans) != 3:
        raise ValueError(f"expected 3 columns, got {len(spans)}: {lines[1]!r}")
    width, rest = spans[-1][1], lines[2:]
    rows = next((i for i, line in enumerate(rest) if len(line) != width), len(rest))
    body, extra = rest[:rows], rest[rows:]
    cells = [(line[:spans[0][1]].rstrip(), line[spans[1][0]:spans[1][1]].strip(),
              line[spans[2][0]:].strip()) for line in body]
    return cells, extra


# ---- the counts a table program must give, by hand ------------------------------------------

def call_flops(call: Any) -> int:
    """A product's FLOPs (:class:`refimpl.strategies.flop_trees.MatCall`, read as plain
    data): ``[m, k] x [k, n]`` is ``m n`` dot products of length ``k``, 2 FLOPs per
    multiply-accumulate, once per batch; ``addmm``'s bias addition is not counted."""
    return 2 * call.batch * call.m * call.k * call.n


def program_counts(program: Any) -> dict[str, dict[Any, int]]:
    """{name: {op packet: FLOPs}} that a counter must report for ``program`` (a
    :class:`refimpl.strategies.flop_trees.TableProgram`): each product counts in "Global"
    and in every module running when it runs (the module and the modules above it); a
    module's ops are listed in the order it first ran them."""
    counts: dict[str, dict[Any, int]] = {GLOBAL: {}}

    def add(call: Any, names: list[str]) -> None:
        packet = getattr(torch.ops.aten, call.op)
        for name in names:
            ops = counts.setdefault(name, {})
            ops[packet] = ops.get(packet, 0) + call_flops(call)

    def visit(stage: Any, names: list[str]) -> None:
        for call in stage.before:
            add(call, names)
        for child in stage.children:
            visit(child, [*names, f"{names[-1]}.{child.name}"])
        for call in stage.after:
            add(call, names)

    for call in program.outside:
        add(call, [GLOBAL])
    for root in program.roots:
        visit(root, [GLOBAL, root.name])
    return counts
