"""``custom_mapping``: formulas a user gives the backend's FLOP counter, as torch documents
them: ``{op packet: formula}`` adds an op or replaces the table's formula for it; a formula
is called with the op's arguments and output as shapes (``formula(*shapes,
out_shape=...)``), or with the values themselves when it carries ``_get_raw = True``; a
formula that is not callable is refused (on construction or when the op runs).

Each example draws the op given a formula (one the table counts, ``mm``, ``addmm``,
``bmm``, or one it does not, ``add``), whether the formula reads shapes or values, its
weight ``w`` and the sizes. Both formulas return ``w`` times the output's element count,
read from ``out_shape`` or from the output value, so the expectation is ``w * numel(out)``
for the given op, by hand; a matrix product run beside it, whose op has no custom formula,
keeps the table's ``2 m k n``.

Reach: the custom formula's op was counted (> 0).
"""

from __future__ import annotations

from math import prod

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from refimpl.oracle import component
from refimpl.oracle.blame import TargetError
from refimpl.properties.reach import reach

aten = torch.ops.aten

#: op name -> (call on sizes (m, k, n), its output's element count); the other product
#: (mm for every op but mm, bmm for mm) keeps the table's count.
CALLS = {
    "mm": (lambda m, k, n: torch.mm(torch.randn(m, k), torch.randn(k, n)), lambda m, k, n: m * n),
    "addmm": (lambda m, k, n: torch.addmm(torch.randn(n), torch.randn(m, k), torch.randn(k, n)),
              lambda m, k, n: m * n),
    "bmm": (lambda m, k, n: torch.bmm(torch.randn(2, m, k), torch.randn(2, k, n)),
            lambda m, k, n: 2 * m * n),
    "add": (lambda m, k, n: torch.randn(m, n) + torch.randn(m, n), lambda m, k, n: m * n),
}


def _formula(weight: int, raw: bool):
    """``weight`` times the output's element count, from ``out_shape`` or the value."""
    if raw:
        def from_values(*args, out_val=None, **kwargs):
            return weight * out_val.numel()

        from_values._get_raw = True
        return from_values

    def from_shapes(*args, out_shape=None, **kwargs):
        return weight * prod(out_shape)

    return from_shapes


@given(st.sampled_from(sorted(CALLS)), st.booleans(), st.integers(1, 9), st.integers(1, 4),
       st.integers(1, 4), st.integers(1, 4))
def test_custom_formulas_replace_and_add(refimpl_backend, op, raw, weight, m, k, n):
    other = "bmm" if op == "mm" else "mm"
    make = component(refimpl_backend, "flop_counter")
    with make(display=False, custom_mapping={getattr(aten, op): _formula(weight, raw)}) as c:
        CALLS[op][0](m, k, n)
        CALLS[other][0](m, k, n)
    counts = c.get_flop_counts().get("Global", {})
    reach(counts.get(getattr(aten, op), 0) > 0)
    expected = {getattr(aten, op): weight * CALLS[op][1](m, k, n),
                getattr(aten, other): 2 * (CALLS[other][1](m, k, n)) * k}
    assert counts == expected, (f"{refimpl_backend.name}: custom formula for {op} (raw={raw}, "
                                f"weight {weight}), m={m} k={k} n={n}: counted {counts}, "
                                f"expected {expected}")


#: what a refusal may raise: refimpl's ValueError on construction, torch's TypeError when
#: the op runs ("'int' object is not callable").
REFUSED = (ValueError, TypeError)


def _refuses(make, op: str, formula) -> bool:
    """Whether the counter refuses ``formula`` for ``op``, on construction (the oracle
    reports a constructor's exception as the target's, chained to it) or when ``op`` runs."""
    try:
        with make(display=False, custom_mapping={getattr(aten, op): formula}):
            CALLS[op][0](2, 3, 4)
    except REFUSED:
        return True
    except TargetError as exc:
        return isinstance(exc.__cause__, REFUSED)
    return False


@given(st.sampled_from(sorted(CALLS)), st.sampled_from([5, "2 * m * n * k", None]))
def test_a_formula_that_is_not_callable_is_refused(refimpl_backend, op, formula):
    make = component(refimpl_backend, "flop_counter")
    with make(display=False, custom_mapping={getattr(aten, op): _formula(1, False)}) as c:
        CALLS[op][0](2, 3, 4)
    reach(c.get_total_flops() > 0)  # the same op with a callable formula is counted
    assert _refuses(make, op, formula), (
        f"{refimpl_backend.name}: custom_mapping {{{op}: {formula!r}}} was accepted")


#: op -> (the call on sizes (m, k), the arguments, keyword arguments and output a shape
#: formula is given for it, by hand: every tensor replaced by its shape, lists kept lists and
#: tuples tuples, other values as they are).
STRUCTURED = {
    "cat": (lambda m, k: torch.cat([torch.randn(m, k), torch.randn(m, 1)], 1),
            lambda m, k: (([torch.Size([m, k]), torch.Size([m, 1])], 1), {},
                          torch.Size([m, k + 1]))),
    "max": (lambda m, k: torch.max(torch.randn(m, k), 1),
            lambda m, k: ((torch.Size([m, k]), 1), {}, (torch.Size([m]), torch.Size([m])))),
    "split": (lambda m, k: torch.split(torch.randn(m, k), 1),
              lambda m, k: ((torch.Size([m, k]), 1), {}, [torch.Size([1, k])] * m)),
    "add": (lambda m, k: torch.add(torch.randn(m, k), torch.randn(k), alpha=2),
            lambda m, k: ((torch.Size([m, k]), torch.Size([k])), {"alpha": 2},
                          torch.Size([m, k]))),
}


@given(st.sampled_from(sorted(STRUCTURED)), st.integers(1, 4), st.integers(1, 4))
def test_a_shape_formula_is_given_the_call_as_shapes(refimpl_backend, op, m, k):
    """A shape formula is called with the op's arguments, keyword arguments and output in
    their own structure, each tensor replaced by its shape (torch's ``shape_wrapper``): a
    list of tensors arrives as a list of shapes, a tuple output as a tuple of shapes. Reach:
    the call holds a list or returns a list or tuple (not only bare tensors)."""
    reach(op != "add")
    seen = []

    def recording(*args, out_shape=None, **kwargs):
        seen.append((args, kwargs, out_shape))
        return 1

    make = component(refimpl_backend, "flop_counter")
    with make(display=False, custom_mapping={getattr(aten, op): recording}):
        STRUCTURED[op][0](m, k)
    expected = STRUCTURED[op][1](m, k)
    assert len(seen) == 1 and seen[0] == expected and all(
        type(got) is type(want) for got, want in zip(seen[0][0], expected[0], strict=True)), (
        f"{refimpl_backend.name}: the shape formula for {op} (m={m}, k={k}) was called with "
        f"{seen}, expected once with {expected} (args, kwargs, out_shape)")


#: formula results that are no FLOP count (a non-negative integer), by what is wrong
NOT_A_COUNT = {"a fraction": 2.5, "a whole float": 4.0, "True": True, "False": False,
               "minus one": -1, "a negative number": -5, "a string": "3", "None": None}


def _every_bad_result(test):
    """Each of :data:`NOT_A_COUNT` as an explicit example, every run."""
    for name in sorted(NOT_A_COUNT):
        test = example(op="mm", raw=False, bad=name)(test)
    return test


@_every_bad_result
@given(st.sampled_from(sorted(CALLS)), st.booleans(), st.sampled_from(sorted(NOT_A_COUNT)))
def test_a_formula_returning_no_count_is_refused(refimpl_backend, op, raw, bad):
    """A FLOP count is a non-negative integer (anything with ``__index__`` but a bool): a
    custom formula returning anything else (a fraction, a float, a bool, a negative number, a
    string, None) is a broken formula; the counter refuses it when the op runs, with a
    TypeError or ValueError naming the op, and never rounds, clamps or adds it. The same
    formula returning 0 is counted as 0. Reach: always (the op ran under the formula).
    Against torch (2.13) it fails: torch adds whatever a formula returns (docs/findings.md,
    FLOPs 18)."""
    make = component(refimpl_backend, "flop_counter")
    value = NOT_A_COUNT[bad]
    reach(True)
    formula = _constant(0, raw)
    with make(display=False, custom_mapping={getattr(aten, op): formula}) as c:
        CALLS[op][0](2, 3, 4)
    assert c.get_flop_counts().get("Global", {}).get(getattr(aten, op), 0) == 0
    name = f"aten.{op}"
    try:
        with make(display=False, custom_mapping={getattr(aten, op): _constant(value, raw)}) as c:
            CALLS[op][0](2, 3, 4)
    except (TypeError, ValueError) as exc:
        assert name in str(exc), f"{refimpl_backend.name}: the refusal does not name {name}: {exc}"
        return
    raise AssertionError(f"{refimpl_backend.name}: a {op} formula returning {value!r} ({bad}) "
                         f"was accepted: counted {c.get_flop_counts().get('Global', {})}")


def _constant(value, raw: bool):
    """A formula returning ``value`` whatever the call."""
    def formula(*args, out_shape=None, out_val=None, **kwargs):
        return value

    if raw:
        formula._get_raw = True
    return formula
