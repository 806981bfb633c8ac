"""CSE across aliasing the random op graphs rarely hold (``refimpl.strategies.cse_cases``).

Each property draws one shape of small graph, in the dialects it exists in, and asks the
judge (``refimpl.expect.cse_soundness.unsound_reasons``: values, outputs, inputs after the
run, the outputs' aliasing, never-merged nodes) whether the backend's result computes what
the original computes. Each shape is a class of aliasing a CSE must track:

* a write through an element of a list of views (``unbind``, ``split``, ``chunk``);
* an in-place op's result, which is its argument itself, returned beside an equal view;
* an opaque Python call (or ``getitem`` of a tuple) whose result aliases one of two or
  three tensor arguments, passed in any order;
* views, writes and pure ops whose arguments are given by keyword;
* a view of a view (``as_strided`` among them), written;
* an ``out=`` argument, the base or a view of it;
* Python's ``x += y`` (``-=``, ``*=``, ``/=``) and ``x[0] = v``: they write ``x``, not ``y``.

Reach: the graph holds two equal calls (a naive CSE would merge them), in every example.
"""

from __future__ import annotations

from hypothesis import given

from refimpl.expect.cse_soundness import naive_duplicates
from refimpl.oracle import skip_unless_takes
from refimpl.properties.cse_case_check import assert_merged, assert_sound, run_case
from refimpl.properties.reach import reach
from refimpl.strategies.cse_cases import cse_cases


def _judged(backend, case) -> None:
    gm, new_graph = run_case(backend, case)
    reach(naive_duplicates(gm.graph) > 0)
    assert_sound(backend, case, gm, new_graph)


@given(cse_cases(("list_view_write",)))
def test_a_write_through_a_list_of_views_separates_equal_reads(refimpl_backend, case):
    """``a = cos(y); y.unbind(0)[1].mul_(2); b = cos(y)``: the write reaches ``y`` through
    one element of a list of views, so ``a`` and ``b`` differ."""
    _judged(refimpl_backend, case)


@given(cse_cases(("returned_write_of_view",)))
def test_an_inplace_result_returned_beside_an_equal_view(refimpl_backend, case):
    """``v = y.t(); w = y.t(); return v.mul_(2), w``: the in-place op returns ``v`` itself,
    so the two outputs are two tensor objects, as in eager."""
    _judged(refimpl_backend, case)


@given(cse_cases(("opaque_alias",)))
def test_an_opaque_call_may_alias_any_of_its_arguments(refimpl_backend, case):
    """``o = f(x, y, z); a = cos(y); o.mul_(2); b = cos(y)`` where the Python function ``f``
    returns ``y`` (or a view of it), or ``o = (x, y, z)[1]``: the write reaches ``y``,
    whichever argument it is and wherever it comes in the graph."""
    _judged(refimpl_backend, case)


@given(cse_cases(("keyword_arguments",)))
def test_arguments_given_by_keyword_alias_as_given_by_position(refimpl_backend, case):
    """``aten.t.default(self=y)`` is a view of ``y`` and ``aten.mul_.Tensor(self=v,
    other=2.0)`` writes ``v``: a write through a view given by keyword separates two reads
    of its base."""
    _judged(refimpl_backend, case)


@given(cse_cases(("view_chain_write",)))
def test_a_write_through_a_view_of_a_view_separates_equal_reads(refimpl_backend, case):
    """``a = cos(y); y.t().as_strided((2, 2), (3, 1)).mul_(2); b = cos(y)``: a write
    through a view of a view reaches ``y``."""
    _judged(refimpl_backend, case)


@given(cse_cases(("out_write",)))
def test_an_out_argument_is_written(refimpl_backend, case):
    """``a = cos(y); torch.neg(x, out=y.t()); b = cos(y)``: the keyword-only ``out``
    argument is written, directly or through a view."""
    _judged(refimpl_backend, case)


@given(cse_cases(("reshaped_twin",)))
def test_an_inplace_view_op_separates_equal_views(refimpl_backend, case):
    """``v = y.t(); w = y.t(); v.t_(); cos(v) + cos(w)``: ``t_`` changes ``v``'s shape and
    strides, not ``w``'s, so the two equal views stay two (as in eager)."""
    _judged(refimpl_backend, case)


@given(cse_cases(("python_writes",)))
def test_python_assignments_write_their_target_only(refimpl_backend, case):
    """``a = cos(t); x += y; b = cos(t)`` (or ``x[0] = 2.0``): for ``t = x``, ``a`` and ``b``
    differ (sound: the judge); for ``t = y``, which the assignment reads but does not write,
    ``b`` is ``a`` (expected merged). symbolic_trace graphs only."""
    skip_unless_takes(refimpl_backend, "fx_graph_cse", ("torch",))
    gm, new_graph = run_case(refimpl_backend, case)
    reach(naive_duplicates(gm.graph) > 0)
    assert_sound(refimpl_backend, case, gm, new_graph)
    assert_merged(refimpl_backend, case, gm, new_graph)
