"""FLOP-counter properties of the backend under test (its ``flop_counter``).

Each property records its reach once per example: whether the op family under test ran and
was counted (> 0). Expected values are hand derivations written here or in
refimpl.expect.flops, never refimpl's formula table. Run against torch with
``pytest properties/test_flops.py --refimpl-target torch``: the grouped-convolution and the
fused-inference properties fail on torch (docs/findings.md). The properties that need
``uncounted_ops()`` (refimpl's extension of torch's API) skip, visibly, for a counter
without it.
"""

from __future__ import annotations

from math import prod

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from refimpl.expect.flops import FlopDerivation
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.conv import ConvConfig, conv_configs
from refimpl.strategies.flop_programs import arithmetic_calls, free_programs
from refimpl.strategies.fused import fused_cases
from refimpl.strategies.matmul import MatmulCase, matmul_cases

aten = torch.ops.aten
CORE_MM = st.sampled_from(["mm", "addmm", "bmm", "baddbmm"])


def counted(backend, fn, grad_mode=torch.enable_grad):
    """The backend's counter after running ``fn`` under ``grad_mode``."""
    with grad_mode(), component(backend, "flop_counter")(display=False) as mode:
        fn()
    return mode


def counts(backend, fn) -> dict:
    """{op packet: FLOPs} of running ``fn`` under the backend's counter."""
    return counted(backend, fn).get_flop_counts().get("Global", {})


def run_conv(cfg: ConvConfig, grads: tuple[bool, bool]):
    x, w, b = cfg.tensors(requires_grad=grads)

    def fn():
        out = cfg.run(x, w, b)
        if any(grads):
            out.sum().backward()

    return fn


def conv_by_hand(cfg: ConvConfig) -> int:
    """Each output element (direct) or input element (transposed) meets C_in/groups x
    prod(K) taps of each of the C_out (direct) / C_out/groups (transposed) filters: 2 FLOPs
    per product."""
    if cfg.transposed:
        per = cfg.in_channels * (cfg.out_channels // cfg.groups) * prod(cfg.kernel)
        return 2 * cfg.batch * prod(cfg.input_size) * per
    per = cfg.out_channels * (cfg.in_channels // cfg.groups) * prod(cfg.kernel)
    return 2 * cfg.batch * prod(cfg.output_size) * per


# --- convolutions and matrix products ------------------------------------------------------

@given(conv_configs())
def test_conv_forward_is_the_hand_count(refimpl_backend, cfg):
    c = counts(refimpl_backend, run_conv(cfg, (False, False)))
    reach(c.get(aten.convolution, 0) > 0)
    assert c == {aten.convolution: conv_by_hand(cfg)}, cfg


@given(conv_configs())
def test_conv_backward_is_twice_forward(refimpl_backend, cfg):
    c = counts(refimpl_backend, run_conv(cfg, (True, True)))
    reach(c.get(aten.convolution_backward, 0) > 0)
    assert c[aten.convolution_backward] == 2 * c[aten.convolution] == 2 * conv_by_hand(cfg), cfg


@given(conv_configs(), st.sampled_from([(True, False), (False, True)]))
def test_conv_backward_one_gradient_costs_one_forward(refimpl_backend, cfg, grads):
    c = counts(refimpl_backend, run_conv(cfg, grads))
    reach(c.get(aten.convolution_backward, 0) > 0)
    assert c[aten.convolution_backward] == c[aten.convolution], (cfg, grads)


@given(matmul_cases(ops=CORE_MM))
def test_mm_family_is_2mnk(refimpl_backend, case):
    args = case.args()
    b, m, k, n = case.multiplied
    total = sum(counts(refimpl_backend, lambda: case.run(*args)).values())
    reach(total > 0)
    assert total == 2 * b * m * k * n, case


@given(conv_configs(), st.integers(2, 3))
def test_conv_counts_scale_with_batch(refimpl_backend, cfg, factor):
    one = sum(counts(refimpl_backend, run_conv(cfg.with_batch(1), (True, True))).values())
    many = sum(counts(refimpl_backend, run_conv(cfg.with_batch(factor), (True, True))).values())
    reach(one > 0)
    assert many == factor * one


@given(matmul_cases(ops=st.sampled_from(["bmm", "baddbmm"])), st.integers(2, 3))
def test_bmm_counts_scale_with_batch(refimpl_backend, case, factor):
    def total(batch):
        scaled = MatmulCase(case.op, batch, case.m, case.k, case.n,
                            None if case.bias_shape is None else (1, case.m, case.n))
        args = scaled.args()
        return sum(counts(refimpl_backend, lambda: scaled.run(*args)).values())

    one = total(case.batch)
    reach(one > 0)
    assert total(case.batch * factor) == factor * one


@given(conv_configs())
def test_same_program_twice_counts_twice(refimpl_backend, cfg):
    once = run_conv(cfg, (True, True))
    single = counts(refimpl_backend, once)
    double = counts(refimpl_backend, lambda: (once(), once()))
    reach(sum(single.values()) > 0)
    assert double == {op: 2 * n for op, n in single.items()}


# --- fused inference paths (issue 10): same math, same count -------------------------------

@given(fused_cases(), st.sampled_from(["inference_mode", "no_grad"]))
def test_fused_inference_paths_count_the_same_math(refimpl_backend, case, fast_mode):
    """Every torch.nn module with a fused inference path, under inference_mode or eval +
    no_grad (fused ops) and with autograd on (unfused: linear layers and attention), against
    the per-module derivation (refimpl.expect.flops)."""
    module, inputs = case.build(), case.inputs()
    fused = counted(refimpl_backend, lambda: case.run(module, inputs), getattr(torch, fast_mode))
    with FlopDerivation(module) as walk:
        unfused = counted(refimpl_backend, lambda: case.run(module, inputs))
    by_op = fused.get_flop_counts().get("Global", {})
    reach(any(by_op.get(op, 0) > 0 for op in case.fused_ops))
    expected = walk.result().total_forward()
    assert (fused.get_total_flops(), unfused.get_total_flops()) == (expected, expected), case


# --- bookkeeping: free ops, uncounted ops, the Global key (refimpl's API extension) --------

@pytest.fixture(scope="module")
def require_uncounted_ops(refimpl_backend):
    """A visible skip, before any example, when the backend's counter has no
    ``uncounted_ops()`` (refimpl's extension of torch's API)."""
    make = component(refimpl_backend, "flop_counter")
    if not hasattr(make(display=False), "uncounted_ops"):
        pytest.skip(f"backend {refimpl_backend.name!r}'s flop counter has no uncounted_ops() "
                    "(refimpl's extension of torch's API)")


@pytest.mark.usefixtures("require_uncounted_ops")
@given(free_programs())
def test_free_ops_count_nothing_and_report_nothing(refimpl_backend, program):
    with component(refimpl_backend, "flop_counter")(display=False) as mode:
        program.run()
    reach(len(program.steps) > 0)
    assert mode.get_flop_counts()["Global"] == {} and mode.get_total_flops() == 0, program
    assert mode.uncounted_ops() == {}, program


#: the line under refimpl's table naming the uncounted ops (docs/differences.md, FLOPs)
UNCOUNTED_LINE = "Uncounted (no FLOP formula, not declared free): "


@pytest.mark.usefixtures("require_uncounted_ops")
@given(arithmetic_calls(), arithmetic_calls())
def test_arithmetic_without_a_formula_is_reported(refimpl_backend, call, other):
    """Calls of two ops without a formula: ``uncounted_ops()`` is {op: calls}, and the last
    line of ``get_table()`` lists each op with its calls, ``op xN``, ops sorted by name."""
    assume(other.name != call.name)
    with component(refimpl_backend, "flop_counter")(display=False) as mode:
        call.run()
        other.run()
    want: dict = {}
    for c in (call, other):
        want[c.op] = want.get(c.op, 0) + c.times
    uncounted = mode.uncounted_ops()
    reach(len(want) == 2)
    assert uncounted == want, (call, other)
    listed = ", ".join(f"{op} x{n}" for op, n in sorted(want.items(), key=lambda i: str(i[0])))
    assert mode.get_table().splitlines()[-1] == UNCOUNTED_LINE + listed, (call, other)


#: a user's library (torch.library) whose ops are named as some of aten's free ops
USER_LIBRARY = "refimpl_flops_test"
USER_OP_NAMES = ("clone", "roll", "cat", "zeros", "product")


def _user_op(name: str):
    """``refimpl_flops_test::<name>(x) -> x @ x.T``, defined on first use (once a process)."""
    namespace = getattr(torch.ops, USER_LIBRARY)
    if not hasattr(namespace, name):
        def product(x: torch.Tensor) -> torch.Tensor:
            return x @ x.T

        torch.library.custom_op(f"{USER_LIBRARY}::{name}", mutates_args=())(product)
    return getattr(namespace, name)


@pytest.mark.usefixtures("require_uncounted_ops")
@given(st.sampled_from(USER_OP_NAMES), st.integers(1, 3), st.integers(1, 4))
def test_a_user_op_named_as_a_free_aten_op_is_reported(refimpl_backend, name, calls, n):
    """A user's op (a torch.library custom op outside aten) named as one of aten's free ops
    (``clone``, ``roll``, ``cat``, ``zeros``) or not: aten's naming convention declares aten's
    ops free, never another library's. It has no formula, so it counts 0 FLOPs (its inner
    product runs below the counter) and ``uncounted_ops()`` is ``{op: calls}``. Reach: the
    op was called more than once."""
    op, x = _user_op(name), torch.randn(n, n)
    reach(calls > 1)
    with component(refimpl_backend, "flop_counter")(display=False) as mode:
        for _ in range(calls):
            op(x)
    what = f"{refimpl_backend.name}: {USER_LIBRARY}::{name} called {calls} times"
    assert mode.get_total_flops() == 0, f"{what}: counted {mode.get_flop_counts()}"
    assert mode.uncounted_ops() == {op: calls}, f"{what}: uncounted {mode.uncounted_ops()}"
