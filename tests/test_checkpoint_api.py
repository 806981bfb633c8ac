"""The checkpoint wrapper's public contract beyond the seed: options, errors, RNG, autocast,
kwargs, pytrees, nesting, siblings, determinism check, selective policies, debug mode,
torch.compile."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

import refimpl
from refimpl.checkpointing import CheckpointError, CheckpointOptions
from refimpl.memory import measure_saved


def block(dim: int = 8) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim), nn.Tanh())


def step(model: nn.Module, *args, **kwargs):
    """Forward under the meter, backward; returns the saved-bytes report."""
    report = measure_saved(lambda m, a, k: sum(o.sum() for o in _tensors(m(*a, **k))),
                           model, args, kwargs)
    report.outputs.backward()
    return report


def _tensors(out) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def assert_same_grads(m1: nn.Module, m2: nn.Module) -> None:
    params = list(zip(m1.named_parameters(), m2.named_parameters(), strict=True))
    assert params
    for (n1, p1), (n2, p2) in params:
        assert n1 == n2 and torch.equal(p1.grad, p2.grad), f"gradient of {n1} differs"


def pair(model: nn.Module, *paths: str, **options) -> tuple[nn.Module, nn.Module]:
    """(model, a deep copy with the submodules at ``paths`` checkpointed)."""
    twin = copy.deepcopy(model)
    for path in paths:
        refimpl.checkpoint(twin.get_submodule(path), **options)
    return model, twin


# -- arguments and errors ------------------------------------------------------------------

def test_returns_module_in_place_and_keeps_names() -> None:
    model = nn.Sequential(block(), block())
    names = [n for n, _ in model.named_parameters()]
    assert refimpl.checkpoint(model[0]) is model[0]
    assert [n for n, _ in model.named_parameters()] == names
    assert list(model.state_dict()) == list(copy.deepcopy(nn.Sequential(block(), block()))
                                            .state_dict())


def test_applying_twice_is_an_error() -> None:
    m = refimpl.checkpoint(block())
    with pytest.raises(ValueError, match="already been applied"):
        refimpl.checkpoint(m)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"use_reentrant": True}, ValueError, "use_reentrant=True is not supported"),
    ({"foo": 1}, ValueError, "unexpected keyword argument.*foo.*allowed"),
    ({"determinism_check": "strict"}, ValueError, "determinism_check='strict'.*'default'"),
    ({"preserve_rng_state": 1}, TypeError, "preserve_rng_state must be True or False"),
    ({"context_fn": 3}, TypeError, "context_fn must be None or a callable"),
])
def test_bad_options_are_clear_errors(kwargs, error, match) -> None:
    m = block()
    with pytest.raises(error, match=match):
        refimpl.checkpoint(m, **kwargs)
    assert refimpl.checkpoint.state(m) is None, "a rejected call left state behind"
    refimpl.checkpoint(m)  # a valid call on the same module still works (torch: see findings)
    assert refimpl.checkpoint.state(m).enable_hook


def test_module_argument_is_checked() -> None:
    with pytest.raises(TypeError, match=r"module must be a torch\.nn\.Module"):
        refimpl.checkpoint(lambda x: x)


def test_options_are_one_frozen_dataclass() -> None:
    m = refimpl.checkpoint(block(), preserve_rng_state=False, early_stop=False)
    options = refimpl.checkpoint.state(m).options
    assert options == CheckpointOptions(preserve_rng_state=False, early_stop=False)
    with pytest.raises(AttributeError):
        options.debug = True


def test_context_fn_must_return_two_context_managers() -> None:
    m = refimpl.checkpoint(block(), context_fn=lambda: None)
    with pytest.raises(TypeError, match="context_fn must return a pair"):
        m(torch.randn(2, 8, requires_grad=True))
    assert refimpl.checkpoint.state(m)._ac_generator is None


# -- semantics -----------------------------------------------------------------------------

def test_dropout_with_and_without_preserved_rng_state() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.Dropout(0.5), nn.Linear(64, 4))
    x = torch.randn(32, 16)
    results = {}
    for preserve in (True, False):
        plain, ckpt = pair(model if preserve else copy.deepcopy(model), "",
                           preserve_rng_state=preserve)
        for m in (plain, ckpt):
            torch.manual_seed(1)
            step(m, x)
        results[preserve] = all(torch.equal(a.grad, b.grad)
                                for a, b in zip(plain.parameters(), ckpt.parameters()))
    # Restored RNG: the same mask; not restored: the recomputation draws a fresh mask.
    assert results == {True: True, False: False}


def test_autocast_is_replayed_in_recomputation() -> None:
    torch.manual_seed(0)
    plain, ckpt = pair(nn.Sequential(block(), block()), "0", "1")
    x = torch.randn(4, 8)
    for m in (plain, ckpt):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(x).float().sum()
        out.backward()  # outside autocast: only a replayed autocast gives bf16 saves back
    assert_same_grads(plain, ckpt)


def test_forward_kwargs_and_pytrees() -> None:
    class Tree(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, xs: dict, *, scale: torch.Tensor, mode: str = "sum") -> dict:
            h = torch.tanh(self.a(xs["x"][0]) * scale + self.b(xs["y"]))
            return {"h": (h, h.exp()), "n": [h.sin().sum(dim=1)], "mode": mode}

    torch.manual_seed(0)
    plain, ckpt = pair(Tree(), "")
    x, y, s = (torch.randn(3, 8, requires_grad=True) for _ in range(3))
    grads = []
    for m in (plain, ckpt):
        step(m, {"x": [x], "y": y}, scale=s, mode="mean")
        grads.append([t.grad.clone() for t in (x, y, s)])
        for t in (x, y, s):
            t.grad = None
    assert_same_grads(plain, ckpt)
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_nested_and_sibling_checkpoints() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Sequential(block(), block()), block(), block())
    plain, ckpt = pair(model, "0", "0.1", "1", "2")
    x = torch.randn(4, 8, requires_grad=True)
    r_plain, r_ckpt = step(plain, x), step(ckpt, x)
    assert_same_grads(plain, ckpt)
    # Only the outer modules' inputs stay: 0's is x (an input), 1's and 2's are 4x8 fp32.
    assert (r_ckpt.bytes, r_ckpt.storages) == (2 * 4 * 8 * 4, 2)
    assert r_ckpt.bytes < r_plain.bytes


def test_bytes_match_torch_composable_checkpoint() -> None:
    from torch.distributed._composable import checkpoint as torch_checkpoint

    torch.manual_seed(0)
    model = nn.Sequential(block(), nn.Sequential(block(), block()), block())
    ours, theirs = pair(model, "1", "1.0", "2")[1], copy.deepcopy(model)
    for path in ("1", "1.0", "2"):
        torch_checkpoint(theirs.get_submodule(path))
    x = torch.randn(4, 8, requires_grad=True)
    r_ours, r_theirs = step(ours, x), step(theirs, x)
    assert_same_grads(ours, theirs)
    assert r_ours.bytes == r_theirs.bytes > 0


def test_retain_graph_recomputes_per_backward() -> None:
    torch.manual_seed(0)
    plain, ckpt = pair(block(), "")
    x = torch.randn(4, 8)
    for m in (plain, ckpt):
        out = m(x).sum()
        out.backward(retain_graph=True)
        out.backward()
    assert_same_grads(plain, ckpt)


def test_no_grad_forward_keeps_nothing() -> None:
    m = refimpl.checkpoint(block())
    with torch.no_grad():
        out = m(torch.randn(2, 8))
    assert out.grad_fn is None and refimpl.checkpoint.state(m)._ac_generator is None


# -- determinism check and debug mode ------------------------------------------------------

class Drifting(nn.Module):
    """Computes something different on every call: ``change`` picks how."""

    def __init__(self, change: str) -> None:
        super().__init__()
        self.change, self.calls = change, 0
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > 1 and self.change == "shape":
            return (x[:1] @ self.w).exp().expand(x.shape[0], -1)
        y = (x @ self.w).exp()
        if self.calls > 1 and self.change == "extra":
            (x @ self.w).sin()
        return y


def test_determinism_check_reports_shape_change() -> None:
    m = refimpl.checkpoint(Drifting("shape"))
    out = m(torch.randn(3, 4)).sum()
    with pytest.raises(CheckpointError, match=r"forward saved \(\(3, 4\).*\(1, 4\)"):
        out.backward()


def test_determinism_check_none_disables_it() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    strict = refimpl.checkpoint(Drifting("extra"), early_stop=False)
    with pytest.raises(CheckpointError, match="saved more tensors"):
        strict(x).sum().backward()
    plain = Drifting("extra")
    lax = refimpl.checkpoint(copy.deepcopy(plain), early_stop=False, determinism_check="none")
    plain(x).sum().backward()
    lax(x).sum().backward()
    assert torch.equal(plain.w.grad, lax.w.grad)


def test_debug_error_shows_both_op_logs() -> None:
    m = refimpl.checkpoint(Drifting("shape"), debug=True)
    out = m(torch.randn(3, 4)).sum()
    with pytest.raises(CheckpointError) as info:
        out.backward()
    text = str(info.value)
    assert "first difference at op 0: forward ran aten.mm.default, recomputation ran " \
           "aten.slice" in text
    assert "ops in the forward (2)" in text and "aten.exp.default" in text


def _save_mm_policy(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.mm.default \
        else CheckpointPolicy.PREFER_RECOMPUTE


class OpCount(TorchDispatchMode):
    """Counts the aten ops dispatched below any mode entered after it."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func)] = self.counts.get(str(func), 0) + 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("debug", [False, True])
def test_selective_policy_with_and_without_debug(debug: bool) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32, bias=False), nn.GELU(), nn.Linear(32, 8, bias=False))
    context_fn = functools.partial(create_selective_checkpoint_contexts, _save_mm_policy)
    plain, sac = pair(model, "", context_fn=context_fn, debug=debug)
    full, full_to_end = pair(model, "")[1], pair(model, "", early_stop=False)[1]
    x = torch.randn(4, 8, requires_grad=True)
    mm_in_backward = {}
    for name, m in (("plain", plain), ("sac", sac), ("full", full), ("to_end", full_to_end)):
        out = m(x).sum()
        with OpCount() as count:
            out.backward()
        mm_in_backward[name] = count.counts.get("aten.mm.default", 0)
    assert_same_grads(plain, sac)
    # Backward of two bias-free Linears: 2 mm each. Full checkpointing recomputes the forward
    # mm: with early stop only the first (the last save is the second mm's input, taken
    # before it runs), without it both. The policy keeps them, so the selective
    # recomputation runs none.
    assert mm_in_backward == {"plain": 4, "sac": 4, "full": 5, "to_end": 6}


def test_under_torch_compile() -> None:
    torch.manual_seed(0)
    plain, ckpt = pair(nn.Sequential(block(16), block(16), nn.Linear(16, 2)), "0", "1")
    compiled_plain = copy.deepcopy(plain)
    x = torch.randn(8, 16)
    step(plain, x)
    # dynamo does not guard on module hooks (config.skip_nnmodule_hook_guards): without a
    # reset the hook-free graph compiled for ``compiled_plain`` would be reused for ``ckpt``.
    torch._dynamo.reset()
    r_compiled_plain = step(torch.compile(compiled_plain, backend="aot_eager"), x)
    torch._dynamo.reset()
    r_ckpt = step(torch.compile(ckpt, backend="aot_eager"), x)
    for a, b in zip(plain.parameters(), ckpt.parameters()):
        torch.testing.assert_close(a.grad, b.grad)
    assert r_ckpt.bytes < r_compiled_plain.bytes


def test_state_of_an_unwrapped_module_is_none() -> None:
    assert refimpl.checkpoint.state(block()) is None


def test_frames_are_freed_with_the_graph() -> None:
    import gc

    from refimpl.checkpointing.frame import Frame

    def live_frames() -> int:
        return sum(type(o) is Frame for o in gc.get_objects())

    before = live_frames()
    model = nn.Sequential(refimpl.checkpoint(block()), refimpl.checkpoint(block()))
    out = model(torch.randn(2, 8, requires_grad=True)).sum()
    assert live_frames() == before + 2
    out.backward()
    del out
    # Freed by reference counting alone: the frames sit in no reference cycle.
    assert live_frames() == before


def test_outer_hooks_see_only_the_inputs() -> None:
    seen: list[tuple[int, ...]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen.append(tuple(t.shape))
        return t

    m = refimpl.checkpoint(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
    x = torch.randn(2, 8, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        m(x)
    assert seen == [(2, 8)]


def test_generator_is_exposed_during_the_forward_only() -> None:
    class Peek(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear, self.during = nn.Linear(4, 4), []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.during.append(refimpl.checkpoint.state(self)._ac_generator)
            return self.linear(x).relu()

    m = refimpl.checkpoint(Peek())
    m(torch.randn(2, 4)).sum().backward()  # forward, then the recomputation
    forward_gen, recompute_gen = m.during
    assert forward_gen is not None and hasattr(forward_gen, "send")
    assert recompute_gen is None  # the recomputation runs with the module's hooks off
    assert refimpl.checkpoint.state(m)._ac_generator is None
