"""Property: a checkpointed model's saved tensors read outside a backward are the unwrapped
model's, however often they are read, and the backward after the reads is still correct.

Autograd exposes what a node saved as its ``_saved_*`` attributes (``grad_fn._saved_self``),
and code reads them outside any backward (debuggers, tests, offloading tools). A checkpoint
keeps nothing inside its region, so each such read must recompute; torch's non-reentrant
checkpoint gives every unpack outside a backward its own recomputation (a fresh id where the
graph task id is -1). Expectation: the unwrapped model, read the same way, node by node in
breadth-first order from the loss's ``grad_fn``.

* Each tensor attribute, read twice, equals the unwrapped model's attribute bit for bit both
  times (dropout masks included: the recomputation replays the RNG), but for a batchnorm's
  running statistics (buffers each recomputation updates).
* The backward after the reads gives the unwrapped model's gradients bit for bit.

Only where the backend promises the unwrapped model's autograd graph (``per_op_graph``; the
reentrant checkpoint puts one node in place of the whole call: documented, skipped) and a
recomputation for every read (``recomputes_repeatedly``; selective checkpointing recomputes a
call once at most: documented, skipped). It passes on the torch targets ``torch-checkpoint``
and ``checkpoint-wrapper``, and fails on ``torch``: its composable checkpoint cannot
recompute a call a second time (docs/findings.md, "Checkpoint").

Reach (each example): a checkpointed call saves a tensor (a read that must recompute).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn
from torch.utils import checkpoint as tuc

from refimpl.expect.checkpoint import COMPOSABLE, assert_same_step, loss, predict_saved, wrapped
from refimpl.expect.checkpoint import Step as StepResult
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.modules import ModuleStack, module_stacks

#: how many times each saved tensor is read before the backward
READS = 2
#: a batchnorm saves its running statistics, buffers that every recomputation updates (as
#: torch's composable checkpoint does: docs/findings.md, "Checkpoint"), so they are not compared
BUFFERS = ("_saved_running_mean", "_saved_running_var")


def _nodes(root) -> Iterator:
    """The autograd nodes reachable from ``root``, breadth first, each once.

    A node's Python object may be made afresh on each access and freed after it, so an id
    alone can come back for another node (torch 2.10 does so): ``seen`` holds the nodes
    themselves, which keeps every id it records taken."""
    seen: dict[int, object] = {}
    queue = [root]
    while queue:
        node = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        yield node
        queue += [parent for parent, _ in node.next_functions]


def read_saved(out: torch.Tensor) -> list[tuple[str, str, list[torch.Tensor]]]:
    """Every tensor a node of ``out``'s graph saved, as (node, attribute, the READS values)."""
    found = []
    for node in _nodes(out.grad_fn):
        for name in sorted(a for a in dir(node) if a.startswith("_saved_") and a not in BUFFERS):
            values = [getattr(node, name) for _ in range(READS)]
            if isinstance(values[0], torch.Tensor):
                found.append((node.name(), name, [v.detach().clone() for v in values]))
    return found


def _step(model, x: torch.Tensor) -> tuple[list, StepResult]:
    """Forward, every saved tensor read READS times, backward (dropout under seed 7)."""
    x = x.detach().clone().requires_grad_()
    torch.manual_seed(7)
    out = loss(model, x)
    reads = read_saved(out)
    out.backward()
    grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    return reads, StepResult(0, grads, x.grad, torch.get_rng_state())


@given(stack=module_stacks())
def test_saved_tensors_read_outside_backward(refimpl_backend, stack: ModuleStack) -> None:
    apply = component(refimpl_backend, "checkpoint")
    promise = getattr(refimpl_backend, "checkpoint_promise", None) or COMPOSABLE
    if not promise.per_op_graph:
        pytest.skip(f"backend {refimpl_backend.name!r}: one node replaces the checkpointed call")
    if not promise.recomputes_repeatedly:
        pytest.skip(f"backend {refimpl_backend.name!r}: a call is recomputed once at most")
    model = stack.build()
    x = stack.example_input()
    torch.manual_seed(7)
    prediction = predict_saved(model, [model.get_submodule(p) for p in stack.checkpointed],
                               loss, x)
    reach(bool(prediction.inside))
    want_reads, want = _step(stack.build(), x)
    got_reads, got = _step(wrapped(stack, apply).model, x)
    what = f"{refimpl_backend.name} checkpoint on {stack.checkpointed}"
    assert [r[:2] for r in got_reads] == [r[:2] for r in want_reads], \
        f"{what}: the saved attributes differ from the unwrapped graph's"
    for (node, name, expected), (_, _, values) in zip(want_reads, got_reads):
        for i, value in enumerate(values):
            assert torch.equal(expected[0], value), (
                f"{what}: read {i + 1} of {node}.{name} outside a backward gives {value}, "
                f"the unwrapped model saved {expected[0]}")
    assert_same_step(want, got, f"{what}, after reading the saved tensors", stack)


class ReadsSaved(torch.autograd.Function):
    """``x.sin()`` whose backward reads ``ctx.saved_tensors`` ``reads`` times."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, reads: int) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.reads = reads
        return x.sin()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        for _ in range(ctx.reads):
            (x,) = ctx.saved_tensors
        return grad * x.cos(), None


class ReadingBlock(nn.Module):
    """A linear layer, then :class:`ReadsSaved`: its backward unpacks the layer's output
    ``reads`` times."""

    def __init__(self, width: int, reads: int) -> None:
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.reads = reads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ReadsSaved.apply(self.lin(x), self.reads)


def _reading_step(model: nn.Module, width: int) -> tuple:
    """Forward and backward; (output, parameter gradients, input gradient) or the error."""
    x = torch.linspace(-1.0, 1.0, 2 * width).reshape(2, width).requires_grad_()
    out = model(x)
    try:
        out.square().sum().backward()
    except RuntimeError as error:
        return error
    return out.detach(), [p.grad for p in model.parameters()], x.grad


@given(width=st.integers(1, 3), reads=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       checkpointed=st.data())
def test_a_saved_tensor_unpacked_twice_in_one_backward(refimpl_backend, width: int,
                                                       reads: list[int], checkpointed) -> None:
    """torch's non-reentrant checkpoint serves each saved tensor once per backward: a custom
    Function whose backward reads ``ctx.saved_tensors`` twice inside a checkpointed module
    raises ``torch.utils.checkpoint.CheckpointError`` ("already unpacked once"); read once,
    the step is the unwrapped model's, bit for bit. Outside the checkpointed blocks any
    number of reads is eager's. Only where the backend promises the unwrapped model's graph
    (``per_op_graph``: the reentrant checkpoint reruns the call with a graph of its own).
    Reach: a checkpointed block's backward reads twice or more."""
    apply = component(refimpl_backend, "checkpoint")
    promise = getattr(refimpl_backend, "checkpoint_promise", None) or COMPOSABLE
    if not promise.per_op_graph:
        pytest.skip(f"backend {refimpl_backend.name!r}: one node replaces the checkpointed call")
    chosen = checkpointed.draw(st.sets(st.sampled_from(range(len(reads))), min_size=1),
                               label="checkpointed blocks")
    twice = any(reads[i] > 1 for i in chosen)
    reach(twice)
    torch.manual_seed(0)
    plain = nn.Sequential(*(ReadingBlock(width, n) for n in reads))
    torch.manual_seed(0)
    model = nn.Sequential(*(ReadingBlock(width, n) for n in reads))
    for i in sorted(chosen):
        model[i] = apply(model[i]) or model[i]
    want, got = _reading_step(plain, width), _reading_step(model, width)
    what = (f"{refimpl_backend.name} checkpoint on blocks {sorted(chosen)} of {len(reads)}, "
            f"saved tensor reads per backward {reads}")
    if twice:
        assert isinstance(got, tuc.CheckpointError), \
            f"{what}: expected torch.utils.checkpoint.CheckpointError, got {got!r}"
        return
    assert not isinstance(got, BaseException), f"{what}: eager's step, the backend raised {got!r}"
    for name, a, b in zip(("output", "parameter gradients", "input gradient"), want, got):
        for u, v in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
            assert torch.equal(u, v), f"{what}: {name} {v}, the unwrapped model's {u}"
