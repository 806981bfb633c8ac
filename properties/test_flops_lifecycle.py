"""What a FLOP counter does around its ``with``: a backward nested in the backward, several
training steps in one ``with``, a second ``with`` while the first is open, and the formulas
it holds.

**A backward inside the backward.** A reentrant checkpoint (``use_reentrant=True``) runs its
block's forward again and then a backward of its own inside the outer backward. The outer
backward goes on afterwards, and the modules around the block must keep what they ran:
each example draws a model ``Outer`` of ``k >= 1`` Linear layers (``pre``), a checkpointed
``Block`` of ``m`` Linear layers, then ``j`` more (``post``), all ``[n, n]`` without bias,
on a ``[b, n]`` input that may need a gradient, and runs forward and backward. By hand
(``p = 2 b n n``, one product): every layer's forward is ``p``; the backward forms each
weight's gradient (``p``) and each layer input's gradient (``p``) except the first layer's
when the input needs none; the block's forward runs twice (once more in the backward).
So "Global" holds all of it, and so does ``Outer``, which runs from the start of the
forward to the end of the backward; a ``pre`` or ``post`` layer holds its own forward and
backward. (The block's own row is not checked: how a counter attributes a reentrant
block's inner backward is not stated anywhere.)

**Training steps in one ``with``** add up per module, and each backward ends the modules it
ran (a test of its own below).

**A second ``with`` of the same counter while it is open** is refused with an error, and
leaves nothing behind: afterwards no dispatch mode of the counter is left on the stack,
and the counter counts a model exactly again.

**A formula given in ``custom_mapping``** is held as itself when it takes raw values
(``_get_raw = True``) and otherwise wrapped to receive shapes, the wrapper keeping the
formula's name and ``__wrapped__`` (``functools.wraps``, as torch's ``shape_wrapper``); the
count under the counter is the formula's value.

Reach: every example runs its case.

Against torch (``--refimpl-target torch``, 2.13) the second property fails: torch's
counter raises only when the inner ``with`` exits, leaves its dispatch mode on the stack,
and then counts every op twice (docs/findings.md, FLOPs 18).
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack, _pop_mode
from torch.utils.checkpoint import checkpoint

from refimpl.oracle import component
from refimpl.properties.reach import reach

aten = torch.ops.aten


class Block(nn.Module):
    """``m`` Linear layers in a row."""

    def __init__(self, n: int, m: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(n, n, bias=False) for _ in range(m)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class Outer(nn.Module):
    """``pre`` layers, the reentrant-checkpointed :class:`Block`, ``post`` layers."""

    def __init__(self, n: int, k: int, m: int, j: int) -> None:
        super().__init__()
        self.pre = nn.Sequential(*[nn.Linear(n, n, bias=False) for _ in range(k)])
        self.block = Block(n, m)
        self.post = nn.Sequential(*[nn.Linear(n, n, bias=False) for _ in range(j)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        x = checkpoint(self.block, x, use_reentrant=True)
        return self.post(x)


def _by_hand(b: int, n: int, k: int, m: int, j: int, input_grad: bool) -> dict[str, int]:
    """The rows the module docstring derives: Global, Outer and each pre/post layer."""
    p = 2 * b * n * n
    pre = {f"Outer.pre.{i}": p + p + p * (i > 0 or input_grad) for i in range(k)}
    post = {f"Outer.post.{i}": 3 * p for i in range(j)}
    block = m * p + m * p + 2 * m * p  # forward, its second run, both gradients
    total = sum(pre.values()) + sum(post.values()) + block
    return {"Global": total, "Outer": total, **pre, **post}


@given(st.integers(1, 3), st.sampled_from([2, 4, 8]), st.integers(1, 2), st.integers(1, 2),
       st.integers(0, 2), st.booleans())
def test_a_backward_inside_the_backward_keeps_the_outer_modules(refimpl_backend, b, n, k, m, j,
                                                                 input_grad):
    """A reentrant checkpoint's inner backward: the rows around it are exact."""
    reach(True)
    torch.manual_seed(0)
    model = Outer(n, k, m, j)
    x = torch.randn(b, n, requires_grad=input_grad)
    with component(refimpl_backend, "flop_counter")(display=False) as counter:
        model(x).sum().backward()
    rows = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    expected = _by_hand(b, n, k, m, j, input_grad)
    got = {name: rows.get(name, 0) for name in expected}
    assert got == expected, (
        f"{refimpl_backend.name} FlopCounterMode around a reentrant checkpoint "
        f"(b={b}, n={n}, pre={k}, block={m}, post={j}, input_grad={input_grad}): "
        f"{got}, by hand {expected}")


def _drop_modes_above(depth: int) -> list:
    """Pop the dispatch modes a failed ``with`` left above ``depth``; return them."""
    left = []
    while len(_get_current_dispatch_mode_stack()) > depth:
        left.append(_pop_mode())
    return left


@given(st.integers(1, 4), st.integers(1, 4))
def test_a_second_with_while_open_is_refused_and_leaves_nothing(refimpl_backend, b, n):
    """``with c: with c:`` raises; then ``c`` counts a Linear exactly, with no mode left."""
    reach(True)
    counter = component(refimpl_backend, "flop_counter")(display=False)
    x = torch.randn(b, n)
    depth = len(_get_current_dispatch_mode_stack())
    raised = None
    try:
        with counter, counter:
            x @ x.T
    except Exception as exc:  # any error refuses; torch's is an AssertionError at exit
        raised = exc
    left = _drop_modes_above(depth)
    assert raised is not None, f"{refimpl_backend.name}: a second with of an open counter ran"
    assert not left, (f"{refimpl_backend.name}: after the refused second with "
                      f"({raised!r}) dispatch modes were left on the stack: {left}")
    layer = nn.Linear(n, n, bias=False)
    with counter:
        layer(x)
    expected = 2 * b * n * n
    counts = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    assert counts == {"Global": expected, "Linear": expected}, (
        f"{refimpl_backend.name}: after a refused second with, a Linear [{b}, {n}] x "
        f"[{n}, {n}] counted {counts}, by hand {expected} under Global and Linear")


def _mm_formula(scale: int):
    def mm_by_shapes(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
        return scale * a_shape[0] * a_shape[1] * b_shape[1]
    return mm_by_shapes


def _raw_mm_formula(scale: int):
    def mm_by_values(a, b, *args, out_val=None, **kwargs) -> int:
        return scale * a.shape[0] * a.shape[1] * b.shape[1] + int(out_val.shape[0] > 0)
    mm_by_values._get_raw = True
    return mm_by_values


@given(st.integers(1, 5), st.integers(1, 4), st.integers(1, 4), st.integers(1, 4),
       st.booleans())
def test_a_custom_formula_is_held_as_itself_or_wrapped_by_name(refimpl_backend, scale, rows,
                                                               inner, cols, raw):
    """``custom_mapping={aten.mm: f}``: held as ``f`` (raw) or a wrapper of ``f`` keeping its
    name; an ``mm`` counts ``f``'s value."""
    reach(True)
    formula = (_raw_mm_formula if raw else _mm_formula)(scale)
    counter = component(refimpl_backend, "flop_counter")(display=False,
                                                         custom_mapping={aten.mm: formula})
    held = counter.flop_registry[aten.mm]
    if raw:
        assert held is formula, f"{refimpl_backend.name}: a raw formula was wrapped: {held!r}"
    else:
        assert held is not formula and getattr(held, "__wrapped__", None) is formula \
            and held.__name__ == formula.__name__, (
                f"{refimpl_backend.name}: a shape formula is held as {held!r} "
                f"(__wrapped__ {getattr(held, '__wrapped__', None)!r}), not a wrapper of "
                f"{formula!r} keeping its name")
    with counter:
        torch.ones(rows, inner) @ torch.ones(inner, cols)
    expected = scale * rows * inner * cols + (raw and rows > 0)
    assert counter.get_total_flops() == expected, (
        f"{refimpl_backend.name}: mm [{rows}, {inner}] x [{inner}, {cols}] with a custom "
        f"formula (raw={raw}, scale {scale}) counted {counter.get_total_flops()}, its value "
        f"is {expected}")


@given(st.integers(1, 3), st.sampled_from([2, 4]), st.integers(1, 3), st.integers(2, 3))
def test_training_steps_in_one_with_add_up_and_each_backward_ends(refimpl_backend, b, n, layers,
                                                                  steps):
    """``steps`` forward and backward passes of a stack of Linear layers in one ``with``, then
    a product outside every module. By hand (``p = 2 b n n``): each step gives each layer
    its forward ``p`` and its weight's gradient ``p``, and every layer but the first (whose
    input needs no gradient) its input's gradient ``p``; the stack holds its layers' sum.
    Every backward ends its modules (the first layer, whose input needs no gradient, never
    sees its input's gradient): the last product, ``[b, n] x [n, b]``, counts under
    "Global" alone."""
    reach(True)
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(n, n, bias=False) for _ in range(layers)])
    x = torch.randn(b, n)
    with component(refimpl_backend, "flop_counter")(display=False) as counter:
        for _ in range(steps):
            model(x).sum().backward()
        x @ x.T
    p = 2 * b * n * n
    expected = {f"Sequential.{i}": steps * (2 * p + p * (i > 0)) for i in range(layers)}
    expected["Sequential"] = sum(expected.values())
    expected["Global"] = expected["Sequential"] + 2 * b * b * n
    rows = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    assert rows == expected, (
        f"{refimpl_backend.name} FlopCounterMode: {steps} training steps of {layers} Linear "
        f"[{b}, {n}] x [{n}, {n}], then x @ x.T outside: {rows}, by hand {expected}")
