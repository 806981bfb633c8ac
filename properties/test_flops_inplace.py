"""In-place ops are counted as their out-of-place ops: a counter that keys its rules by op
name must read ``cumsum_`` as ``cumsum``, ``index_fill_`` as ``index_fill``, and so on.

Each example runs every step of :data:`refimpl.strategies.flop_programs.INPLACE_STEPS` once,
in a drawn order (elementwise ops, also as ``_foreach_`` kernels and inside a profiler
range, scans, masked and indexed writes, triangle masks), each in place or out of place as
drawn, then optionally a backward. None of them is a matrix product, so by torch's
counter's convention the program costs 0 FLOPs whichever variants run: the counts are empty, and a
counter that reports the ops it could not count (``uncounted_ops()``, refimpl's extension
of torch's API) reports none. torch's counter has no ``uncounted_ops()``: there the counts
alone are checked.

Reach: some step ran in place.

The in-place matrix products (``addmm_``, ``baddbmm_``, ``addbmm_``, ``addmv_``, ``addr_``)
are counted as their out-of-place products (torch 2.13 counts them 0: docs/findings.md,
FLOPs 15). Reach: the product ran in place.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.flop_programs import InplaceProgram, inplace_programs


@given(inplace_programs())
def test_inplace_ops_count_as_their_out_of_place_ops(refimpl_backend,
                                                     program: InplaceProgram):
    reach(any(in_place for _, in_place in program.steps))
    with component(refimpl_backend, "flop_counter")(display=False) as counter:
        program.run()
    counts = counter.get_flop_counts().get("Global", {})
    assert counts == {} and counter.get_total_flops() == 0, (
        f"{refimpl_backend.name}: {program!r} counted {counts}, expected nothing")
    uncounted = counter.uncounted_ops() if hasattr(counter, "uncounted_ops") else {}
    assert uncounted == {}, (f"{refimpl_backend.name}: {program!r}: reported as uncounted "
                             f"(no formula, not free): {uncounted}")


#: the matrix products with an in-place form: name -> (operand shapes from (b, m, k, n),
#: FLOPs by hand: 2 per multiply-accumulate of the product, the bias addition free).
PRODUCTS = {
    "addmm": (lambda b, m, k, n: [(m, n), (m, k), (k, n)], lambda b, m, k, n: 2 * m * k * n),
    "baddbmm": (lambda b, m, k, n: [(b, m, n), (b, m, k), (b, k, n)],
                lambda b, m, k, n: 2 * b * m * k * n),
    "addbmm": (lambda b, m, k, n: [(m, n), (b, m, k), (b, k, n)],
               lambda b, m, k, n: 2 * b * m * k * n),
    "addmv": (lambda b, m, k, n: [(m,), (m, k), (k,)], lambda b, m, k, n: 2 * m * k),
    "addr": (lambda b, m, k, n: [(m, n), (m,), (n,)], lambda b, m, k, n: 2 * m * n),
}


#: the forms a product is called in; half the draws in place (the case torch misses).
FORMS = st.one_of(st.just("in place"), st.sampled_from(["in place", "out of place", "out="]))


@given(st.sampled_from(sorted(PRODUCTS)), FORMS,
       st.integers(1, 4), st.integers(1, 5), st.integers(1, 5), st.integers(1, 5))
def test_inplace_products_count_as_their_out_of_place_ops(refimpl_backend, name, form, b, m,
                                                          k, n):
    """``bias.addmm_(a, b)`` (and baddbmm_, addbmm_, addmv_, addr_) computes the same
    product as ``torch.addmm(bias, a, b)`` and writes it into ``bias``: the same FLOPs,
    ``2 m k n`` (``2 b m k n`` batched, ``2 m k`` for addmv, ``2 m n`` for addr), in each
    form (in place, out of place, ``out=``)."""
    shapes, flops = PRODUCTS[name]
    bias, *operands = (torch.randn(shape) for shape in shapes(b, m, k, n))
    reach(form == "in place")
    calls = {"in place": lambda: getattr(bias, f"{name}_")(*operands),
             "out of place": lambda: getattr(torch, name)(bias, *operands),
             "out=": lambda: getattr(torch, name)(bias, *operands, out=torch.empty(0))}
    with component(refimpl_backend, "flop_counter")(display=False) as counter:
        calls[form]()
    expected = flops(b, m, k, n)
    assert counter.get_total_flops() == expected, (
        f"{refimpl_backend.name}: {name} {form} on shapes {shapes(b, m, k, n)}: counted "
        f"{counter.get_flop_counts().get('Global', {})}, expected {expected} FLOPs")
