"""``torch.while_loop`` under the backend's FLOP counter: every iteration counted, the result.

Each example draws a program (:func:`refimpl.strategies.flop_programs.loop_programs`):
square products outside every module, then a module that runs products, a
``torch._higher_order_ops.while_loop`` whose body runs 1-3 drawn products 0, 2 or 3 times
(once in an explicit example), and more products. The expectation
(:func:`refimpl.expect.flops.loop_counts`), by hand from the program's data, follows the
loop's documented meaning (``while cond_fn(*carried): carried = body_fn(*carried)``) and
the counter's rule that every op that runs is counted, never a silent 0: the body's
products once per iteration, under "Global" and the module.

Checked: ``get_flop_counts()`` equals the hand count (zero entries included), no op is
listed as uncounted (where the counter lists them), and the module's output equals the
body applied that many times, computed without while_loop, and never aliases its input
(a loop that never ran returns copies).

Reach: the loop runs a number of times other than once and its body counts FLOPs (the
count per iteration is a real multiplication).

Against torch (``--refimpl-target torch``, 2.13) this fails: torch's counter returns
NotImplemented from the higher-order op, which while_loop hands back as its result, and
counts nothing (docs/findings.md, FLOPs 17).
"""

from __future__ import annotations

import torch
from hypothesis import example, given

from refimpl.expect.flops import loop_counts, loop_result, step_counts
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.flop_programs import LoopProgram, loop_programs


@given(loop_programs())
@example(LoopProgram(outside=(), before=("mm",), body=("addmm",), after=(), iterations=1,
                     size=2, seed=0))  # one iteration: the count per loop is the iteration's
def test_while_loop_counts_every_iteration_and_returns_the_last(refimpl_backend,
                                                                 program: LoopProgram):
    body = step_counts(program.body, program.size)
    reach(program.iterations != 1 and any(body.values()))
    x = program.inputs()
    with component(refimpl_backend, "flop_counter")(display=False) as counter:
        out = program.run(x)
    expected = loop_counts(program)
    observed = {"Global": {}} | counter.get_flop_counts()  # torch lists "Global" once used
    assert observed == expected, (f"{refimpl_backend.name}: {program!r}: counted {observed}, "
                                  f"expected {expected} by hand")
    uncounted = counter.uncounted_ops() if hasattr(counter, "uncounted_ops") else {}
    assert uncounted == {}, f"{refimpl_backend.name}: {program!r}: listed {uncounted} uncounted"
    assert isinstance(out, torch.Tensor), (
        f"{refimpl_backend.name}: {program!r}: the module returned {out!r} under the counter")
    assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr(), (
        f"{refimpl_backend.name}: {program!r}: the module's output aliases its input (a loop "
        "that never ran must return copies)")
    torch.testing.assert_close(out, loop_result(program, x), msg=lambda m: (
        f"{refimpl_backend.name}: {program!r}: the module's output under the counter is not "
        f"the body applied {program.iterations} times: {m}"))
