"""``torch.cond`` under the backend's FLOP counter: the higher-order op's count and result.

Each example draws a program (:mod:`refimpl.strategies.flop_programs`): square products outside
every module, then a module that runs products, ``torch.cond`` over two branches of drawn
products (an op may run in one branch only, or count 0 in one branch: an empty inner
dimension) and more products. The expectation (:mod:`refimpl.expect.flops`), by hand
from the program's data, follows torch's documented rule: per module and op, the larger of
the two branches' counts is added to what ran before and after, and the call returns the
branch the predicate selects.

Checked: ``get_flop_counts()`` equals the hand count (zero entries included) and the
module's output equals the selected branch's, computed without torch.cond.

Reach: the two branches' counts differ (the bound is a real choice).

Against torch (``--refimpl-target torch``, 2.13) this fails: torch's counter returns the
true branch's output whatever the predicate, and adds both branches when the module counted
before the cond (docs/findings.md, FLOPs 7).
"""

from __future__ import annotations

import torch
from hypothesis import given

from refimpl.expect.flops import cond_counts, cond_result, step_counts
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.flop_programs import CondProgram, cond_programs


@given(cond_programs())
def test_cond_counts_the_larger_branch_and_returns_the_selected_one(refimpl_backend,
                                                                     program: CondProgram):
    n = program.size
    reach(step_counts(program.true_steps, n) != step_counts(program.false_steps, n))
    x = program.inputs()
    with component(refimpl_backend, "flop_counter")(display=False) as counter:
        out = program.run(x)
    expected = cond_counts(program)
    observed = {"Global": {}} | counter.get_flop_counts()  # torch lists "Global" once used
    assert observed == expected, (f"{refimpl_backend.name}: {program!r}: counted {observed}, "
                                  f"expected {expected} by hand")
    torch.testing.assert_close(out, cond_result(program, x), msg=lambda m: (
        f"{refimpl_backend.name}: {program!r}: the module's output under the counter is not "
        f"the selected branch's: {m}"))
