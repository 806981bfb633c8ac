"""A partitioner's own options, through the backend under test's ``compile``.

A target may take partitioner options torch has no config for by keyword,
``compile(fn, memory_budget=..., **options)`` (refimpl: ``profile_repeats``,
``solver_time_limit``; the meaning is docs/design.md's and ``refimpl.PartitionOptions``').
A target whose ``compile`` takes no keyword options (torch's) is skipped, with the reason.

* ``profile_repeats`` under the ``"profile"`` runtime estimator: each distinct call the
  estimator times (an op on inputs of the same shapes, strides, dtypes and devices) is run
  once to warm up and then ``profile_repeats`` times, on random inputs (finite, not all
  zero) of the recorded shapes, strides, dtype and device; calls with the same signature
  share one timing. The program calls a custom op (``refimpl_props::counted_mm``) that
  records every real call; the calls made while the first compiled forward runs are the
  timing's and the forward's own. Half the programs mark the batch size of ``x`` dynamic:
  the graph then holds symbolic sizes, and the timing runs at their hints (the sizes of the
  call that compiled), on the device the values live on.
* ``solver_time_limit``: a limit no solve can meet (1e-9 s) at a budget that makes the
  exact solver choose raises an error naming ``solver_time_limit``; a generous one plans.
* ``optimize_layout``: a conv net of one conv (each class inductor's rule tells apart,
  :func:`~refimpl.properties.test_layout_strength.one_conv_nets`) compiled for training with
  ``optimize_layout=True`` at budget 1.0 saves the conv's output (or the relu's: the backward
  reads one of them, and recomputing a conv is not what budget 1.0 does) channels-last exactly
  when inductor's training rule (:func:`refimpl.expect.layout_report.inductor_rule`) converts
  the net, and with ``False`` never: the layout pass runs before partitioning when asked, and
  only then. Read off the saved tensors themselves (a saved-tensors hook), not off anything
  the backend reports. (A dispatch mode cannot watch the forward: dynamo runs no compiled
  code under one.)
* A bad value (``profile_repeats`` < 1 or not an int; ``solver_time_limit`` <= 0, infinite,
  NaN or not a number; ``cse`` or ``optimize_layout`` not a bool) is refused by ``compile``
  in one line naming the option, never clamped (docs/design.md: bad input is an error
  naming the argument).

Reach (``refimpl.properties.reach``): the program has two calls of one signature (shared
timing) for the first property; inductor's rule converts the net (so the option decides)
for the ``optimize_layout`` property; every example of the others is the case it is for.
"""

from __future__ import annotations

import inspect
import math
from collections import Counter

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import fx

from refimpl.expect.layout_report import inductor_rule
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.properties.test_layout_strength import eager_convs, one_conv_nets
from refimpl.strategies.custom_matmul import as_matmul

#: every real call of the custom op: :func:`signature` of each argument
CALLS: list[tuple] = []


def signature(t: torch.Tensor) -> tuple:
    """Shape, strides, dtype, device, and whether the values are drawn (finite, not all
    zero: the estimator times on random inputs, as a program's are)."""
    drawn = bool(torch.isfinite(t).all() and t.ne(0).any())
    return (tuple(t.shape), t.stride(), t.dtype, str(t.device), drawn)


@torch.library.custom_op("refimpl_props::counted_mm", mutates_args=())
def counted_mm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w``, recording the call's signature in :data:`CALLS`."""
    CALLS.append((signature(x), signature(w)))
    return x @ w


as_matmul(counted_mm)


def takes_options(backend) -> None:
    """Skip (with the reason) a target whose ``compile`` takes no keyword options."""
    compile_fn = component(backend, "compile")
    params = inspect.signature(compile_fn).parameters.values()
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        pytest.skip(f"backend {backend.name!r}: compile takes no partitioner options")


@st.composite
def counted_programs(draw):
    """(fn, inputs): ``x`` times two weights of one shape (two calls of one signature),
    and optionally a third weight of another width; the weights
    transposed or not (strides), float32 or float64; ``x``'s batch size marked dynamic or
    not (a symbolic size: the estimator times on inputs of its hint, on the op's device)."""
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    n, width, out = draw(st.integers(2, 6)), draw(st.integers(2, 6)), draw(st.integers(2, 6))
    same = 2  # two calls of one signature: one timing shared
    other = draw(st.sampled_from([None, out + 1]))
    transposed = draw(st.booleans())

    def weight(cols: int) -> torch.Tensor:
        w = torch.randn(cols, width, dtype=dtype).t() if transposed else \
            torch.randn(width, cols, dtype=dtype)
        return w.requires_grad_()

    x = torch.randn(n, width, dtype=dtype, requires_grad=True)
    if draw(st.booleans()):
        torch._dynamo.mark_dynamic(x, 0)
    weights = [weight(out) for _ in range(same)] + ([weight(other)] if other else [])

    def fn(x, *ws):
        return sum(counted_mm(x, w).cos().sum() for w in ws)

    return fn, [x, *weights]




@given(program=counted_programs(), repeats=st.integers(1, 4),
       budget=st.sampled_from([0.5, 1.0]))
def test_partition_profile_times_each_call_signature_repeats_times(refimpl_backend, program,
                                                                   repeats, budget):
    takes_options(refimpl_backend)
    fn, inputs = program
    x, weights = inputs[0], inputs[1:]
    forward = [(signature(x), signature(w)) for w in weights]
    reach(len(set(forward)) < len(forward))
    torch._dynamo.reset()
    with torch._functorch.config.patch(activation_memory_budget_runtime_estimator="profile"):
        compiled = component(refimpl_backend, "compile")(fn, memory_budget=budget,
                                                         profile_repeats=repeats)
        CALLS.clear()
        compiled(*inputs)  # the first call compiles (and times), then runs the forward
    expected = Counter(forward)
    for call in set(forward):
        expected[call] += 1 + repeats  # a warm-up, then the repeats, once per signature
    assert Counter(CALLS) == expected, (
        f"profile_repeats={repeats}, budget={budget}, forward calls {forward}: expected the "
        f"op called (forward and timing) {dict(expected)}, observed {dict(Counter(CALLS))}")


def matmul_chain(x, w1, w2):
    return ((x @ w1).cos() @ w2).sin().sum()


def chain_inputs(n: int) -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(n, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True),
            torch.randn(8, 8, requires_grad=True)]


@given(n=st.integers(2, 8), tight=st.booleans(), budget=st.sampled_from([0.3, 0.5]))
def test_partition_solver_time_limit_is_honoured(refimpl_backend, n, tight, budget):
    takes_options(refimpl_backend)
    reach(True)
    limit = 1e-9 if tight else 30.0
    inputs = chain_inputs(n)
    torch._dynamo.reset()
    compiled = component(refimpl_backend, "compile")(matmul_chain, memory_budget=budget,
                                                     solver_time_limit=limit)
    try:
        out = compiled(*inputs)
    except Exception as exc:  # the target's own type, or dynamo's wrapper around it
        assert tight and "solver_time_limit" in str(exc), (
            f"solver_time_limit={limit}, memory_budget={budget}, n={n}: compile raised "
            f"{type(exc).__name__}: {str(exc)[:300]}")
        return
    assert not tight, (f"solver_time_limit={limit}s at memory_budget={budget}, n={n}: the "
                       "solve finished (expected an error naming solver_time_limit)")
    assert torch.equal(out, matmul_chain(*chain_inputs(n))), "the compiled forward differs"


#: values each option refuses: (option, value)
BAD_OPTIONS = st.one_of(
    st.tuples(st.just("profile_repeats"),
              st.one_of(st.integers(max_value=0), st.sampled_from([True, False, 1.5, 2.0,
                                                                   "3", None]))),
    st.tuples(st.just("solver_time_limit"),
              st.one_of(st.floats(max_value=0.0), st.integers(max_value=0),
                        st.sampled_from([math.inf, math.nan, "1", True, None, 1j]))),
    st.tuples(st.sampled_from(["cse", "optimize_layout"]),
              st.sampled_from([0, 1, 1.0, "True", None, "false"])),
)


@given(bad=BAD_OPTIONS, good_repeats=st.integers(1, 3), good_limit=st.floats(0.001, 1e6))
def test_partition_refuses_bad_partitioner_options(refimpl_backend, bad, good_repeats,
                                                  good_limit):
    takes_options(refimpl_backend)
    reach(True)
    name, value = bad
    options = {"profile_repeats": good_repeats, "solver_time_limit": good_limit, name: value}
    compile_fn = component(refimpl_backend, "compile")
    try:
        compile_fn(matmul_chain, memory_budget=0.5, **options)(*chain_inputs(2))
    except Exception as exc:  # the target's own type (refimpl: ValueError, through blame)
        message = str(exc)
    else:
        raise AssertionError(f"{name}={value!r} was accepted (expected an error naming it)")
    assert f"{name}={value!r}" in message and "\n" not in message, (
        f"{name}={value!r}: refused with {message!r} (expected one line naming {name})")
    compile_fn(matmul_chain, memory_budget=1.0, profile_repeats=good_repeats,
               solver_time_limit=good_limit)  # the good values alone are accepted


def channels_last(t: torch.Tensor) -> bool:
    """Laid out channels-last and not also contiguous (a 4-d tensor of more than one channel
    and pixel is never both)."""
    return t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) \
        and not t.is_contiguous()


#: in training only a default conv converts: drawn two times in three (reach)
CONV_KINDS = ("default",) * 6 + ("grouped", "small", "in_out")


@given(net=one_conv_nets(CONV_KINDS), optimize_layout=st.booleans())
def test_partition_layout_option_runs_the_layout_pass_when_asked(refimpl_backend, net,
                                                                 optimize_layout):
    takes_options(refimpl_backend)
    module, x = net
    nodes = len(fx.symbolic_trace(module).graph.nodes)
    rule_converts = inductor_rule(eager_convs(module, x), nodes, is_inference=False)
    expected = optimize_layout and rule_converts
    reach(rule_converts)  # the option then decides the layout
    torch._dynamo.reset()
    compiled = component(refimpl_backend, "compile")(module, memory_budget=1.0,
                                                     optimize_layout=optimize_layout)
    out_shape = tuple(module(x).shape)
    x_in = x.clone().requires_grad_()
    # of each saved tensor shaped as the conv's output, the relu's or the conv's; not the
    # input (or a copy of it), which has that shape too where the conv keeps its size
    layouts = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        if tuple(t.shape) == out_shape and not torch.equal(t.detach(), x_in.detach()):
            layouts.append(channels_last(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = compiled(x_in)
    out.sum().backward()
    assert layouts and set(layouts) == {expected}, (
        f"{module!r}, optimize_layout={optimize_layout}: saved conv outputs laid out "
        f"channels-last: expected all {expected} (inductor's training rule converts: "
        f"{rule_converts}), observed {layouts}")
