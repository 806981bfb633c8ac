"""The activation meter (refimpl.memory): what a forward leaves held for backward.

The CPU tests pin the meter's accounting rules; the cuda-marked test checks it agrees with
the CUDA caching allocator's ``requested_bytes.all.current`` delta, the seed's figure.
"""

from __future__ import annotations

import pytest
import torch

from refimpl import measure_saved, saved_activation_bytes

U = 32
BLOCK = U * U * 4


def leaf(*shape, device="cpu"):
    return torch.randn(*shape, device=device, requires_grad=True)


def test_counts_new_storages_held_for_backward():
    x, w = leaf(U, U), leaf(U, U)
    # cos(x) is saved for mm's weight gradient; x and w are inputs: one block
    assert saved_activation_bytes(lambda: torch.mm(x.cos(), w).sum()) == BLOCK


def test_inputs_and_their_views_are_free():
    x = leaf(U, U)
    assert saved_activation_bytes(lambda: (x.t() * x.t()).sum()) == 0


def test_views_of_one_storage_count_once():
    x = leaf(U, U)

    def f():
        y = x.cos()
        return (y.t() * y.t()).sum() + (y[0] * y[0]).sum()

    report = measure_saved(f)
    # saved: x (cos's input, an input: no bytes), y.t() twice and y[0] twice (one storage)
    assert report.bytes == BLOCK and report.storages == 1 and report.saved_tensors == 5


def test_inputs_in_closure_lists_are_inputs():
    """Weights reached through a list in the closure are inputs, not activations."""
    ws = [leaf(U, U) for _ in range(3)]

    def f():
        x = ws[0]
        for w in ws[1:]:
            x = torch.mm(x, w)
        return x.sum()

    # the first mm's output is saved for the second mm's weight gradient
    assert saved_activation_bytes(f) == BLOCK


def test_module_parameters_are_inputs():
    lin = torch.nn.Linear(U, U)
    x = torch.randn(4, U)
    assert saved_activation_bytes(lin, x) == 0  # saves x and the weight: both inputs


def test_nothing_held_without_grad():
    x = torch.randn(U, U)
    assert saved_activation_bytes(lambda: x.cos().sum()) == 0


def test_outputs_are_returned_for_backward():
    x = leaf(U)
    report = measure_saved(lambda: x.exp().sum())
    report.outputs.backward()
    torch.testing.assert_close(x.grad, x.detach().exp())


def test_rejects_non_callable():
    with pytest.raises(TypeError, match="fn must be callable"):
        saved_activation_bytes(3)


@pytest.mark.cuda
@pytest.mark.parametrize("compiled", [False, True])
def test_agrees_with_cuda_allocator(compiled):
    """Seed-sized (512) blocks: the meter equals the allocator's requested-bytes delta."""
    u = 512
    x, ws = leaf(u, u, device="cuda"), [leaf(u, u, device="cuda") for _ in range(3)]

    def f():
        y = x.cos()
        for w in ws:
            y = torch.mm(y, w).cos()
        return y.sum()

    call = torch.compile(f, backend="refimpl") if compiled else f
    call().backward()
    torch.cuda.synchronize()
    start = torch.cuda.memory_stats()["requested_bytes.all.current"]
    out = call()
    torch.cuda.synchronize()
    allocator = torch.cuda.memory_stats()["requested_bytes.all.current"] - start
    out.backward()
    meter = saved_activation_bytes(call)
    # the output scalar (4 bytes, 512 with rounding) is held by the allocator, not the meter
    assert abs(allocator - meter) <= 512, (allocator, meter)
    assert meter == 6 * u * u * 4


def test_default_arguments_are_inputs():
    lin = torch.nn.Linear(U, U)
    x = torch.randn(4, U, requires_grad=True)
    assert saved_activation_bytes(lambda m=lin: m(x).relu().sum()) == 4 * U * 4  # relu's out


def test_a_freed_inputs_address_reused_by_an_activation_still_counts():
    """Issue 10 item 6's family: storages are told apart by identity, inputs held while
    measured. Here an input's last reference is dropped during the forward and a new
    activation is placed at its address where the allocator reuses it (it usually does for
    1000-byte blocks); a meter keyed on addresses took that activation for the input."""
    n = 250
    state = {}

    def f(x):
        address = state["w"].untyped_storage().data_ptr()
        state["w"] = None  # the input's last reference (unless the meter holds it)
        fresh = [torch.empty(n) for _ in range(64)]
        y = next((t for t in fresh if t.data_ptr() == address), fresh[0]).copy_(x.detach())
        return (x * y).sum()  # saves x (an input) and y (new)

    for _ in range(8):
        state["w"] = torch.randn(n)
        assert saved_activation_bytes(f, leaf(n)) == n * 4


def test_measure_held_sees_what_autograd_does_not_save():
    """A selective checkpoint's cache (a dict of mm outputs) is invisible to the saved-tensor
    meter and visible to measure_held; outputs the caller holds are not counted."""
    import functools

    from torch.utils.checkpoint import (
        CheckpointPolicy,
        checkpoint,
        create_selective_checkpoint_contexts,
    )

    from refimpl import measure_held

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.mm.default \
            else CheckpointPolicy.PREFER_RECOMPUTE

    x, w = leaf(U, U), leaf(U, U)
    ctx = functools.partial(create_selective_checkpoint_contexts, policy)

    def f():  # the mm output is cached by the policy; nothing is saved outside
        return checkpoint(lambda a: torch.mm(a, w).cos(), x, use_reentrant=False,
                          context_fn=ctx).sum()

    assert saved_activation_bytes(f) == 0
    assert measure_held(f).bytes == BLOCK
    assert measure_held(lambda: x.exp()).bytes == BLOCK  # exp's output: saved and returned
    assert measure_held(lambda: x.cos()).bytes == 0  # returned, not saved: the caller's
