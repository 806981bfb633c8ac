"""The FLOP counter's report, what a user reads: ``get_table()``, the table printed on exit
(``display=True``), and the counts behind them, under every constructor option.

Each example draws a program of matrix products on the meta device, run outside every
module and inside nested modules (:mod:`refimpl.strategies.flop_trees`; sizes on a log
scale, so the table's unit ranges from none to T, and some products of 0 FLOPs; every edge
where the unit changes, past T included, and 2 below it, is also run every time), and the
counter's options: ``depth`` (None or 0-4), ``display``, ``mods`` (none, the first root
module, or the list of every root: torch's constructor ignores it, and so must the counts),
whether the same counter object runs the program twice in two ``with`` blocks (the counts
restart at each), and the depth passed to ``get_table`` (None: the constructor's).

The expectation (:mod:`refimpl.expect.flop_table`) is written from torch's documented
table, from a hand count of the program's plain data, never from a counter:

- ``get_flop_counts()`` and ``get_total_flops()`` equal the hand count;
- ``get_table(depth)``, read back cell by cell, has exactly the rows, indentation, order,
  numbers in the one unit, and shares that the hand count gives at that depth;
- with ``display=True``, each ``with`` printed that table at the constructor's depth and
  nothing else; with ``display=False`` nothing;
- a warning the constructor gives (torch's and refimpl's say ``mods`` is not needed) points
  at the line that constructed the counter (its ``stacklevel``), not into the counter's own
  module.

Reach: some FLOPs were counted and ``get_table`` shows at least one module row.

Against torch (``--refimpl-target torch``, 2.13 with tabulate 0.10) this fails: its table
loses every leading space (docs/findings.md, FLOPs 12); the rest of its table agrees.
"""

from __future__ import annotations

import inspect
import io
import warnings
from contextlib import redirect_stdout

from hypothesis import example, given
from hypothesis import strategies as st

from refimpl.expect.flop_table import expected_rows, program_counts, table_rows
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.flop_trees import (
    UNIT_EDGES,
    TableProgram,
    table_programs,
    unit_edge_program,
)

DEPTHS = st.one_of(st.none(), st.integers(0, 4))


def _mods(form: str, modules: list):
    """The ``mods`` argument a user might pass: none, one module, a list of modules."""
    return {"none": None, "module": modules[0], "list": list(modules)}[form]


def _printed_table(printed: str, blocks: int) -> str:
    """The one table that ``blocks`` ``with`` blocks each printed (all the same program);
    AssertionError when the blocks printed different text."""
    each = len(printed) // blocks
    assert printed == printed[:each] * blocks, f"the {blocks} blocks printed different text"
    return printed[:each].removesuffix("\n")


def _read(text: str, what: str) -> list:
    rows, after = table_rows(text)
    assert not after, f"{what}: lines after the table: {after}\n{text}"
    return rows


def _on_every_unit_edge(test):
    """Every unit edge (and 2 below it) as an explicit example, every time: the table's unit
    at each edge, past T included, and the plain count below 10."""
    for edge in UNIT_EDGES:
        for below in (False, True):
            test = example(unit_edge_program(edge, below), None, 1, True, "none", False)(test)
    return test


@given(table_programs(), DEPTHS, DEPTHS, st.booleans(),
       st.sampled_from(["none", "module", "list"]), st.booleans())
@_on_every_unit_edge
def test_table_shows_the_hand_count(refimpl_backend, program: TableProgram, depth,
                                    table_depth, display, mods, reuse):
    expected = program_counts(program)
    total = sum(expected["Global"].values())
    shown = table_depth if table_depth is not None else depth
    reach(total > 0 and any(not label.lstrip().startswith(("Global", "-"))
                            for label, _, _ in expected_rows(expected, shown)))
    modules = program.build()
    with warnings.catch_warnings(record=True) as caught:  # "mods argument is not needed"
        warnings.simplefilter("always")
        counter = component(refimpl_backend, "flop_counter")(
            mods=_mods(mods, modules), depth=depth, display=display)
    own_module = inspect.getfile(type(counter))
    misplaced = [f"{w.filename}:{w.lineno}: {w.message}" for w in caught
                 if w.filename == own_module]
    assert not misplaced, (f"{refimpl_backend.name}: mods={mods}: the constructor's warning "
                           f"points into the counter's own module, not at its caller: "
                           f"{misplaced}")
    printed = io.StringIO()
    with redirect_stdout(printed):
        for _ in range(1 + reuse):
            with counter:
                program.run(modules)
    case = f"{refimpl_backend.name}: {program!r}, depth={depth}, mods={mods}, reuse={reuse}"
    assert counter.get_flop_counts() == expected, f"{case}: counts differ from the hand count"
    assert counter.get_total_flops() == total, case
    table = counter.get_table(table_depth)
    assert _read(table, "get_table") == expected_rows(expected, shown), (
        f"{case}: get_table({table_depth}) is not the hand count's table:\n{table}\n"
        f"expected rows: {expected_rows(expected, shown)}")
    if not display:
        assert printed.getvalue() == "", f"{case}: display=False printed {printed.getvalue()!r}"
        return
    at_exit = _printed_table(printed.getvalue(), 1 + reuse)
    assert _read(at_exit, "printed on exit") == expected_rows(expected, depth), (
        f"{case}: the table printed on exit is not the hand count's table at depth {depth}:"
        f"\n{at_exit}")
