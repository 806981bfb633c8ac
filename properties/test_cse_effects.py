"""CSE of effects a schema hides or qualifies (``refimpl.strategies.cse_cases``).

* Python calls with effects: ``torch.manual_seed`` (its aten op returns nothing) before each
  of two equal random draws, and a user function named like ``torch.sym_*`` or like the
  builtin ``max`` that writes its argument: never merged (symbolic_trace graphs only);
* an attention kernel whose only randomness is its ``dropout_p``: two calls with
  ``dropout_p > 0`` are two draws, two with ``dropout_p == 0`` (``0``, ``0.0``, ``-0.0``,
  by position or keyword, or left out: its default is 0.0) are one value and are merged;
* a maybe-copy op (``reshape``, ``flatten``, ``contiguous``) twice, one result written, in
  an aten graph whose values were not all recorded (a pass added nodes without
  ``meta["val"]``): whether it copied is unknown, and the result must still be sound;
* a maybe-copy op twice on one value, the first result written, with recorded values whose
  sizes are static or symbols: merged when both are views of a contiguous input (the op
  run on the recorded values says so), never when each copies a transposed one;
* a pure op twice and an in-place op writing the first while reading the second: merged
  when the op is pointwise (``a.add_(b)`` becomes ``a.add_(a)``, the same values), never
  when it is not (``a.addmm_(b, b)`` reading what it writes computes something else).

* a graph with no inputs: ``a = full(...)``, ``a.tril_()`` (or another write), the same
  ``full`` again, read by nothing: removing that repeat is sound (nothing reads it, so
  nothing sees the write), and it is expected removed.
* ``a = make(x); b = make(x); r = pure(b); a.<writer>(); s = pure(b)``: ``s`` repeats
  ``r``; with ``s`` gone, ``b``'s last read comes before the write to ``a``, so ``b`` is
  merged into ``a`` too (2 nodes removed, expected: a CSE that stops after the pass that
  refused ``b`` leaves it).

* ``y = clone(x)``, ``y.add_(1.0)`` 2 or 300 times, ``r = reshape(y); s = reshape(y)``
  (or ``contiguous``): ``s`` is ``r`` (expected merged), with positions and write counts
  past 256.

Every shape is drawn with the interned op strings and with equal fresh ones.

Each asks the judge (``refimpl.expect.cse_soundness.unsound_reasons``) and, where the
generator claims a sound merge by hand, that the backend made it. Reach: the graph holds two
equal calls, in every example.
"""

from __future__ import annotations

from hypothesis import given

from refimpl.expect.cse_soundness import naive_duplicates
from refimpl.oracle import skip_unless_takes
from refimpl.properties.cse_case_check import assert_merged, assert_sound, run_case
from refimpl.properties.reach import reach
from refimpl.strategies.cse_cases import SHAPES, cse_cases


def _judged(backend, case, merged: bool = False) -> None:
    gm, new_graph = run_case(backend, case)
    reach(naive_duplicates(gm.graph) > 0)
    assert_sound(backend, case, gm, new_graph)
    if merged:
        assert_merged(backend, case, gm, new_graph)


@given(cse_cases(("opaque_functions",)))
def test_python_calls_with_effects_are_never_merged(refimpl_backend, case):
    """``torch.manual_seed(0); rand_like(x); torch.manual_seed(0); rand_like(x)`` draws
    the same numbers twice; ``sym_bump_(y)`` twice adds 2, and so does a user's function
    named ``max`` that adds 1 to its argument (not the builtin)."""
    skip_unless_takes(refimpl_backend, "fx_graph_cse", SHAPES["opaque_functions"].styles)
    _judged(refimpl_backend, case)


@given(cse_cases(("attention_dropout",)))
def test_attention_is_random_exactly_when_its_dropout_is(refimpl_backend, case):
    """Two equal attention calls: kept for ``dropout_p > 0``, merged for ``dropout_p == 0``
    and for ``dropout_p`` left out."""
    _judged(refimpl_backend, case, merged=True)


@given(cse_cases(("unrecorded_values",)))
def test_maybe_copies_without_recorded_values_are_sound(refimpl_backend, case):
    """``r = reshape(y); s = reshape(y); r.mul_(2); cos(s)`` with ``y``'s value unrecorded:
    the backend cannot tell a view from a copy, and its result is sound either way."""
    skip_unless_takes(refimpl_backend, "fx_graph_cse", ("torch",))  # not every value recorded
    _judged(refimpl_backend, case)


@given(cse_cases(("write_reads_twin",)))
def test_an_inplace_op_reading_the_twin_of_what_it_writes(refimpl_backend, case):
    """``a = cos(y); b = cos(y); a.add_(b)`` is merged (``a.add_(a)``);
    ``a.addmm_(b, b)`` is not."""
    _judged(refimpl_backend, case, merged=True)


@given(cse_cases(("dead_repeat",)))
def test_a_repeat_nobody_reads_is_removed_after_a_write(refimpl_backend, case):
    """``a = full(...); a.tril_(); b = full(...)`` with no inputs and ``b`` unread: ``b``
    goes (a CSE that compares the write's position with ``b``'s reads must count none)."""
    _judged(refimpl_backend, case, merged=True)


@given(cse_cases(("lifted_refusal",)))
def test_a_merge_refused_for_a_read_that_goes_is_made(refimpl_backend, case):
    """``a = clone(x); b = clone(x); r = cos(b); a.mul_(2); s = cos(b)``: ``s`` is ``r``, and
    then ``b`` is ``a`` (read only before the write): both removed."""
    _judged(refimpl_backend, case, merged=True)


@given(cse_cases(("maybe_copy_twice",)))
def test_a_maybe_copy_is_merged_exactly_when_it_is_a_view(refimpl_backend, case):
    """``r = reshape(y); s = reshape(y); r.mul_(2); cos(s)``: one value when ``y`` is
    contiguous (both are views of it: expected merged), two when it is transposed (both
    copy), with static sizes and with symbolic ones."""
    _judged(refimpl_backend, case, merged=True)


@given(cse_cases(("views_after_write",)))
def test_equal_views_after_a_write_keep_its_readers_equal(refimpl_backend, case):
    """``y.mul_(2); a = cos(y); v = y.t(); w = y.t(); b = cos(y)``: ``w`` is ``v`` and ``b``
    is ``a`` (the write comes before every read), whether ``y`` is an input or a clone."""
    _judged(refimpl_backend, case, merged=True)


@given(cse_cases(("unbacked_sizes",)))
def test_values_of_a_data_dependent_size_are_merged(refimpl_backend, case):
    """``n = x.nonzero().float(); a = cos(n); b = cos(n)`` traced symbolically (``n``'s rows
    are an unbacked symbol): ``b`` is ``a``; only a node defining such a symbol stays."""
    _judged(refimpl_backend, case, merged=True)


@given(cse_cases(("many_writes",)))
def test_a_maybe_copy_twice_after_many_writes_is_merged(refimpl_backend, case):
    """``y.add_(1.0)`` 2 or 300 times, then ``reshape(y)`` twice: one value (expected merged),
    with graph positions and write counts past CPython's small ints."""
    _judged(refimpl_backend, case, merged=True)
