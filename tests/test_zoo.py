"""The zoo of real bugs (tests/zoo/): each bug is present, and its catching property fails.

For every zoo backend:

- an example test shows the bug on a small hand-made input: the zoo backend differs from
  eager (or from the hand count), and refimpl does not;
- a catch test (``slow``) runs only the catching property against the zoo backend, in
  this process, as the main CI job does (ci profile, 10 examples; unshrunk: only the
  verdict is read), and requires that it fails. A bug no property catches is marked
  ``xfail(strict=True)`` with the reason, so a property that starts catching it turns the
  run red until the mark and docs/zoo.md are updated.

docs/zoo.md lists every backend; a test keeps the page and the zoo in step.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import Phase, settings
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

import refimpl
from refimpl.expect.precision import Precision
from refimpl.fuzz.profiles import register_profiles
from refimpl.memory import measure_saved
from refimpl.oracle.builtin import RefimplBackend
from tests.zoo import checkpoint as zoo_checkpoint
from tests.zoo import cse as zoo_cse
from tests.zoo import flops as zoo_flops
from tests.zoo import layout as zoo_layout
from tests.zoo import partition as zoo_partition
from tests.zoo import zoo_backends

ROOT = Path(__file__).resolve().parent.parent
ZOO = zoo_backends()
#: zoo backends no property catches at 10 examples (name -> why); see docs/zoo.md.
NOT_CAUGHT: dict[str, str] = {}


def _target(backend: type) -> str:
    return f"{backend.__module__}:{backend.__name__}"


def main_job_settings() -> settings:
    """The main CI job's Hypothesis settings (the ci profile, 10 examples), unshrunk: the
    test reads only whether the property fails."""
    register_profiles()
    ci = settings.get_profile("ci")
    return settings(ci, max_examples=10, phases=[p for p in ci.phases if p is not Phase.shrink])


@contextlib.contextmanager
def applied(prop, chosen: settings) -> Iterator[None]:
    """``prop`` (a ``@given`` test) run under ``chosen``, as ``@settings(chosen)`` above its
    ``@given`` would; its own settings are put back after (the module keeps one object)."""
    key = "_hypothesis_internal_use_settings"
    previous = getattr(prop, key)
    setattr(prop, key, chosen)
    try:
        yield
    finally:
        setattr(prop, key, previous)


def run_catcher(backend: type) -> BaseException | None:
    """Run ``backend.catcher`` (``module::test``) in this process with the zoo backend as
    ``refimpl_backend`` (what ``--refimpl-target`` gives the fixture; float32 precision, the
    plugin's default, for the properties that take one); the exception it
    failed with, or None when it passed. A skip propagates (it is neither)."""
    module, test = backend.catcher.split("::")
    prop = getattr(importlib.import_module(f"refimpl.properties.{module}"), test)
    fixtures = {"refimpl_backend": backend(), "refimpl_precision": Precision.named("float32")}
    wanted = {k: v for k, v in fixtures.items() if k in inspect.signature(prop).parameters}
    with applied(prop, main_job_settings()):
        try:
            prop(**wanted)
        except pytest.skip.Exception:
            raise
        except Exception as failure:  # any failure of the property counts
            return failure
    return None


def _catch_params():
    for backend in ZOO:
        marks = [pytest.mark.slow]
        if backend.name in NOT_CAUGHT:
            marks.append(pytest.mark.xfail(strict=True, reason=NOT_CAUGHT[backend.name]))
        yield pytest.param(backend, id=backend.name, marks=marks)


@pytest.mark.parametrize("backend", list(_catch_params()))
def test_the_catching_property_fails_on_the_bug(backend):
    """The same verdict as ``CI=true pytest --pyargs refimpl.properties.<module> -k <test>
    --refimpl-target tests.zoo.<component>:<Backend> --refimpl-max-examples 10``."""
    failure = run_catcher(backend)
    assert failure is not None, f"{backend.name}: {backend.catcher} passed at 10 examples"
    print(f"{backend.name}: {backend.catcher} failed: {type(failure).__name__}: "
          f"{str(failure).splitlines()[0][:200] if str(failure) else ''}")


def test_every_zoo_backend_is_documented_and_real():
    """docs/zoo.md has one row per zoo backend, naming its issue and catching property;
    every backend names an issue ``owner/repo#number``, a title, and a property that
    exists."""
    page = (ROOT / "docs" / "zoo.md").read_text()
    names = [b.name for b in ZOO]
    assert len(names) == len(set(names))
    rows = re.findall(r"^\| *(\w+) *\| *`(zoo:[\w-]+)`", page, flags=re.M)
    assert sorted(n for _, n in rows) == sorted(names), "docs/zoo.md and tests/zoo differ"
    for backend in ZOO:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+#\d+", backend.issue), backend.name
        assert backend.title and backend.__doc__ and backend.issue in backend.__doc__
        module, test = backend.catcher.split("::")
        source = (ROOT / "properties" / f"{module}.py").read_text()
        assert f"def {test}(" in source, f"{backend.name}: no property {backend.catcher}"
        row = next(line for line in page.splitlines() if f"`{backend.name}`" in line)
        assert backend.issue in row and test in row, f"docs/zoo.md row for {backend.name}"
        caught = "not caught" if backend.name in NOT_CAUGHT else "yes"
        assert f"| {caught} |" in row, f"docs/zoo.md: {backend.name} should say {caught}"


# --- the bugs, shown on small hand-made inputs --------------------------------------------
def _cse_outputs(backend, fn, *inputs):
    """``fn`` traced (by ``make_fx`` when ``fn.aten``: factory calls stay calls), CSE'd by
    ``backend`` (an instance), and run on ``inputs``."""
    if getattr(fn, "aten", False):
        gm = make_fx(fn)(*[t.clone() for t in inputs])
    else:
        gm = torch.fx.symbolic_trace(fn)
    return torch.fx.GraphModule(gm, backend.fx_graph_cse(gm.graph))(*inputs)


def _cse_both(zoo_class, fn, *inputs, seed=0):
    """(eager, refimpl's CSE, the zoo backend's CSE) outputs, each from ``seed``."""
    runs = []
    for run in (fn, lambda *a: _cse_outputs(RefimplBackend(), fn, *a),
                lambda *a: _cse_outputs(zoo_class(), fn, *a)):
        torch.manual_seed(seed)
        runs.append(run(*inputs))
    return runs


def _int_and_float_one(x):
    return (x + 1).sum(), (x + 1.0).sum()


def test_numbers_by_value_merges_int_and_float_constants():
    eager, ours, zoo = _cse_both(zoo_cse.NumbersByValueCSE, _int_and_float_one,
                                 torch.arange(3))
    assert [t.dtype for t in ours] == [t.dtype for t in eager] == [torch.int64, torch.float32]
    assert zoo[1].dtype == torch.int64  # x + 1.0 came back as x + 1


def _twice_plus_one(x):
    return x + 1, x + 1


def test_merges_returned_outputs_returns_one_tensor_twice():
    eager, ours, zoo = _cse_both(zoo_cse.MergesReturnedOutputsCSE, _twice_plus_one,
                                 torch.zeros(3))
    assert eager[0] is not eager[1] and ours[0] is not ours[1]
    assert zoo[0] is zoo[1]


def _sum_before_and_after_a_write(x):
    y = x.clone()
    before = y.sum()
    y.add_(1)
    return before * 10 + y.sum()  # one output: the two sums are not both returned


def test_mutation_not_a_barrier_reads_a_stale_value():
    eager, ours, zoo = _cse_both(zoo_cse.MutationNotABarrierCSE, _sum_before_and_after_a_write,
                                 torch.zeros(4))
    assert eager.item() == ours.item() == 4.0
    assert zoo.item() == 0.0  # the second sum was answered by the first


def _two_filled_buffers_written(x):
    a = torch.ones(3)
    b = torch.ones(3)
    a.add_(x)
    b.mul_(2)
    return a * 10 + b


_two_filled_buffers_written.aten = True  # symbolic_trace would fold torch.ones into constants


def test_merges_mutated_factories_writes_into_one_buffer():
    x = torch.full((3,), 5.0)
    eager, ours, zoo = _cse_both(zoo_cse.MergesMutatedFactoriesCSE, _two_filled_buffers_written,
                                 x)
    assert torch.equal(ours, eager) and torch.equal(eager, torch.full((3,), 62.0))
    assert torch.equal(zoo, torch.full((3,), 132.0))  # both writes hit one buffer


def _two_uniform_draws(x):
    return torch.rand_like(x) - torch.rand_like(x)


def _two_normal_draws(x):
    return torch.randn_like(x) - torch.randn_like(x)


@pytest.mark.parametrize("zoo_class, fn", [(zoo_cse.MergesRandomCSE, _two_uniform_draws),
                                           (zoo_cse.UnlistedRandomCSE, _two_normal_draws)])
def test_merges_random_draws_once(zoo_class, fn):
    eager, ours, zoo = _cse_both(zoo_class, fn, torch.zeros(8))
    assert torch.equal(ours, eager) and eager.abs().min() > 0
    assert torch.equal(zoo, torch.zeros(8))  # two draws became one


def test_unlisted_random_keeps_the_listed_ones_apart():
    """The planted list still bans what it names (``rand_like``): the defect is only the
    ops it leaves out."""
    _, _, zoo = _cse_both(zoo_cse.UnlistedRandomCSE, _two_uniform_draws, torch.zeros(8))
    assert zoo.abs().min() > 0


def _two_transposes(x):
    return x.t(), x.t()


def test_merges_returned_views_returns_one_view_twice():
    eager, ours, zoo = _cse_both(zoo_cse.MergesReturnedViewsCSE, _two_transposes,
                                 torch.zeros(2, 3))
    assert eager[0] is not eager[1] and ours[0] is not ours[1]
    assert zoo[0] is zoo[1]


def _sums_over_last_two_dims(x):
    return x.sum(-1).mean() * 10 + x.sum(-2).mean()


def test_ints_by_hash_merges_dims_minus_one_and_minus_two():
    eager, ours, zoo = _cse_both(zoo_cse.IntsByHashCSE, _sums_over_last_two_dims,
                                 torch.ones(2, 3))
    assert ours.item() == eager.item() == 32.0  # 3 * 10 + 2
    assert zoo.item() == 33.0  # sum(x, -2) answered by sum(x, -1)


def _counted(zoo_class, fn, *inputs) -> tuple[int, int]:
    """(refimpl's total, the zoo counter's total) for ``fn(*inputs)``."""
    totals = []
    for counter in (RefimplBackend().flop_counter(display=False),
                    zoo_class().flop_counter(display=False)):
        with counter:
            fn(*inputs)
        totals.append(counter.get_total_flops())
    return tuple(totals)


# (zoo backend, program, inputs, hand count, the zoo's count)
FLOP_CASES = [
    # depthwise 3x3 over 4 channels, 3x3 output: 2 * 9 positions * 4 filters * 9 taps
    (zoo_flops.GroupsIgnoredFlops, lambda x, w: F.conv2d(x, w, groups=4),
     (torch.randn(1, 4, 5, 5), torch.randn(4, 1, 3, 3)), 2 * 9 * 36, 4 * 2 * 9 * 36),
    # fvcore#78's own case: ConvTranspose2d(32, 1, 3) on a 1x1 input does 32 * 9 MACs
    (zoo_flops.TransposedByOutputFlops, F.conv_transpose2d,
     (torch.randn(1, 32, 1, 1), torch.randn(32, 1, 3, 3)), 2 * 32 * 9, 2 * 9 * 32 * 9),
    # 4 -> 6 channels, 2x2 input: 2 * 4 positions * 4 * 6 * 9
    (zoo_flops.TransposedOutChannelsFlops, F.conv_transpose2d,
     (torch.randn(1, 4, 2, 2), torch.randn(4, 6, 3, 3)), 2 * 4 * 216, 2 * 4 * 4 * 4 * 9),
    (zoo_flops.MatmulAsMacsFlops, torch.mm, (torch.randn(3, 4), torch.randn(4, 5)),
     2 * 3 * 4 * 5, 3 * 4 * 5),
    (zoo_flops.BmmUncountedFlops, torch.bmm, (torch.randn(2, 3, 4), torch.randn(2, 4, 5)),
     2 * 2 * 3 * 4 * 5, 0),
    (zoo_flops.MatmulFamilyNumelFlops, torch.mv, (torch.randn(4, 8), torch.randn(8)),
     2 * 4 * 8, 2 * 32 * 8),
    (zoo_flops.MatmulFamilyNumelFlops, torch.dot, (torch.randn(8), torch.randn(8)),
     2 * 8, 2 * 8 * 8),
    # attention on CPU, q = k = v of [1, 2, 4, 8]: q @ k^T and p @ v, 2 * 2 * 4 * 4 * 8 each
    (zoo_flops.CpuFlashAttentionUncountedFlops, F.scaled_dot_product_attention,
     (torch.randn(1, 2, 4, 8),) * 3, 2 * (2 * 2 * 4 * 4 * 8), 0),
]


@pytest.mark.parametrize("zoo_class, fn, inputs, hand, planted", FLOP_CASES,
                         ids=[f"{c[0].name}-{i}" for i, c in enumerate(FLOP_CASES)])
def test_flop_bug_miscounts_the_hand_count(zoo_class, fn, inputs, hand, planted):
    ours, zoo = _counted(zoo_class, fn, *inputs)
    assert ours == hand
    assert zoo == planted != hand


def test_transposed_backward_counts_the_backward_as_a_plain_conv():
    """ConvTranspose2d(2, 2, 2, stride=2) on 3x3: the forward is 2 * 9 positions * 16; the
    backward (both gradients) twice that; the planted formula spreads it over the 6x6
    gradient of the output."""
    x = torch.randn(1, 2, 3, 3, requires_grad=True)
    w = torch.randn(2, 2, 2, 2, requires_grad=True)
    y = F.conv_transpose2d(x, w, stride=2)
    totals = []
    for counter in (RefimplBackend().flop_counter(display=False),
                    zoo_flops.TransposedBackwardFlops().flop_counter(display=False)):
        with counter:
            torch.autograd.grad(y.sum(), (x, w), retain_graph=True)
        totals.append(counter.get_total_flops())
    assert totals == [2 * (2 * 9 * 16), 2 * (2 * 36 * 16)]


def test_baddbmm_kwargs_raise_inside_the_counter():
    bias, a, b = torch.randn(2, 3, 5), torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    ours, _ = _counted(zoo_flops.MatmulAsMacsFlops, torch.baddbmm, bias, a, b)
    assert ours == 2 * 2 * 3 * 4 * 5
    with zoo_flops.BaddbmmKwargsFlops().flop_counter(display=False):
        torch.baddbmm(bias, a, b)  # no keywords: counted
        with pytest.raises(TypeError):
            torch.baddbmm(bias, a, b, beta=0.5, alpha=2.0)


def test_enclosing_module_is_credited_three_quarters():
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 4, bias=False)))
    x = torch.randn(2, 4)
    per_module = []
    for counter in (RefimplBackend().flop_counter(display=False),
                    zoo_flops.EnclosingModuleShortchangedFlops().flop_counter(display=False)):
        with counter:
            model(x)
        per_module.append({name: sum(ops.values())
                           for name, ops in counter.get_flop_counts().items()})
    total = 2 * 2 * 4 * 4
    ours, zoo = per_module
    assert set(ours.values()) == {total} and len(ours) == 4  # Global, outer, inner, linear
    assert sorted(zoo.values()) == [total * 3 // 4, total * 3 // 4, total, total]


def _step(compiled_or_eager, x, w, seed=0):
    """One forward and backward from ``seed``: (loss, dL/dw)."""
    w = w.detach().clone().requires_grad_()
    torch.manual_seed(seed)
    loss = compiled_or_eager(x.clone(), w)
    (grad,) = torch.autograd.grad(loss, w)
    return loss.detach(), grad


def _dropout_chain(x, w):
    return F.dropout((x @ w).sin(), 0.5, training=True)


def _mask_consistent_grad(x, w, dropped) -> torch.Tensor:
    """dL/dw for L = sum(cos(dropout(sin(x @ w)))) through the mask ``dropped`` shows."""
    kept = (dropped != 0).float() * 2.0
    return x.T @ (-torch.sin(dropped) * kept * torch.cos(x @ w))


def _grad_of_drawn(compiled, x, w):
    """(the dropout output the forward drew, dL/dw the backward computed)."""
    w = w.detach().clone().requires_grad_()
    dropped = compiled(x, w)
    (grad,) = torch.autograd.grad(dropped.cos().sum(), w)
    return dropped.detach(), grad


def test_recomputes_random_redraws_the_mask():
    x, w = torch.randn(6, 6), torch.randn(6, 6)
    torch.manual_seed(0)
    torch._dynamo.reset()
    dropped, grad = _grad_of_drawn(refimpl.compile(_dropout_chain, memory_budget=0.0), x, w)
    assert torch.allclose(grad, _mask_consistent_grad(x, w, dropped), atol=1e-5)
    torch._dynamo.reset()
    zoo = zoo_partition.RecomputesRandomPartitioner().compile(_dropout_chain, memory_budget=0.0)
    dropped, grad = _grad_of_drawn(zoo, x, w)
    assert not torch.allclose(grad, _mask_consistent_grad(x, w, dropped), atol=1e-5)


def _saved_bytes(fn, *inputs) -> int:
    """Bytes ``fn`` keeps for backward, by refimpl's meter (as the partition properties)."""
    return measure_saved(fn, *inputs).bytes


def _sin_chain(x, w):
    return (x @ w).sin().sin().sin().sum()


def test_over_budget_keeps_more_than_the_budget_allows():
    x, w = torch.randn(64, 64, requires_grad=True), torch.randn(64, 64, requires_grad=True)
    held = {}
    for name, budget in (("no recompute", 1.0), ("ours", 0.5)):
        torch._dynamo.reset()
        held[name] = _saved_bytes(refimpl.compile(_sin_chain, memory_budget=budget), x, w)
    torch._dynamo.reset()
    zoo = _saved_bytes(zoo_partition.OverBudgetPartitioner().compile(
        _sin_chain, memory_budget=0.5), x, w)
    assert held["ours"] <= 0.5 * held["no recompute"] < zoo


def _reads_then_mutates(x, w):
    a = x.sin()
    x.mul_(2)
    return (a * w).sum()


def test_recomputes_mutated_input_reads_after_the_write():
    x, w = torch.randn(8), torch.randn(8)
    eager = _step(_reads_then_mutates, x, w)
    torch._dynamo.reset()
    ours = _step(refimpl.compile(_reads_then_mutates, memory_budget=0.0), x, w)
    assert torch.allclose(ours[1], eager[1])
    torch._dynamo.reset()
    zoo_fn = zoo_partition.RecomputesMutatedInputReadsPartitioner().compile(
        _reads_then_mutates, memory_budget=0.0)
    try:
        zoo = _step(zoo_fn, x, w)
    except RuntimeError as error:  # the saved input was written since: autograd refuses
        assert "modified by an inplace operation" in str(error)
    else:
        assert not torch.allclose(zoo[1], eager[1])  # sin(2x) where eager has sin(x)


def _checkpointed_matmuls(x, w):
    def region(t):
        return (t @ w).sin() @ w

    return torch.utils.checkpoint.checkpoint(region, x, use_reentrant=False).sum()


def test_ignores_checkpoint_regions_saves_what_the_user_recomputes():
    x, w = torch.randn(32, 32, requires_grad=True), torch.randn(32, 32, requires_grad=True)
    torch._dynamo.reset()
    ours = _saved_bytes(refimpl.compile(_checkpointed_matmuls, memory_budget=1.0), x, w)
    torch._dynamo.reset()
    zoo = _saved_bytes(zoo_partition.IgnoresCheckpointRegionsPartitioner().compile(
        _checkpointed_matmuls, memory_budget=1.0), x, w)
    assert zoo > ours


def _checkpoint_step(apply, model_fn, x, seed=0, autocast=False):
    """Gradients (and buffers) of one step of ``apply(model_fn())`` from ``seed``."""
    torch.manual_seed(seed)
    model = model_fn()
    target = model[0] if apply is None else apply(model[0])
    model[0] = target
    torch.manual_seed(seed + 1)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = model(x).float().sum()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    return grads, {k: v.clone() for k, v in model.named_buffers()}


def _dropout_block():
    return nn.Sequential(nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 8)))


def _same(a: list, b: list) -> bool:
    return all(torch.allclose(p, q) for p, q in zip(a, b, strict=True))


def test_rng_not_restored_recomputes_a_new_mask():
    x = torch.randn(4, 8)
    eager, _ = _checkpoint_step(None, _dropout_block, x)
    ours, _ = _checkpoint_step(refimpl.checkpoint, _dropout_block, x)
    zoo, _ = _checkpoint_step(zoo_checkpoint.RngNotRestoredCheckpoint().checkpoint,
                              _dropout_block, x)
    assert _same(ours, eager) and not _same(zoo, eager)


def _linear_block():
    return nn.Sequential(nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8)))


@pytest.mark.parametrize("zoo_class", [zoo_checkpoint.CpuAutocastDroppedCheckpoint,
                                       zoo_checkpoint.AutocastDefaultDtypeCheckpoint])
def test_autocast_bugs_recompute_in_another_dtype(zoo_class):
    """The forward ran in bfloat16; the planted recomputations run in float32 (autocast
    dropped) or float16 (autocast's default dtype)."""
    x = torch.randn(4, 8)
    eager, _ = _checkpoint_step(None, _linear_block, x, autocast=True)
    ours, _ = _checkpoint_step(refimpl.checkpoint, _linear_block, x, autocast=True)
    assert _same(ours, eager)
    try:
        zoo, _ = _checkpoint_step(zoo_class().checkpoint, _linear_block, x, autocast=True)
    except torch.utils.checkpoint.CheckpointError as error:  # recomputed dtypes differ
        assert "dtype" in str(error)
    else:
        assert not _same(zoo, eager)


def _norm_block():
    return nn.Sequential(nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)))


def test_norm_stats_skipped_in_forward_updates_once_not_twice():
    """torch's composable checkpoint runs the batchnorm twice in a step (forward and
    recomputation) and so updates its statistics twice; the planted one once."""
    from torch.distributed._composable import checkpoint as torch_checkpoint

    x = torch.randn(4, 8)
    _, expected = _checkpoint_step(torch_checkpoint, _norm_block, x)
    _, ours = _checkpoint_step(refimpl.checkpoint, _norm_block, x)
    _, zoo = _checkpoint_step(zoo_checkpoint.NormStatsSkippedInForwardCheckpoint().checkpoint,
                              _norm_block, x)
    count = "0.1.num_batches_tracked"
    assert ours[count].item() == expected[count].item() == 2
    assert zoo[count].item() == 1
    assert torch.allclose(ours["0.1.running_mean"], expected["0.1.running_mean"])
    assert not torch.allclose(zoo["0.1.running_mean"], expected["0.1.running_mean"])


def _layout_outputs(backend, fn, *inputs):
    gm = torch.fx.symbolic_trace(fn)
    with torch.no_grad():
        return backend.optimize_layout(gm, list(inputs))(*inputs)


def _layout_both(zoo_class, fn, *inputs):
    with torch.no_grad():
        eager = fn(*inputs)
    return (eager, _layout_outputs(RefimplBackend(), fn, *inputs),
            _layout_outputs(zoo_class(), fn, *inputs))


class _ConvRelu(nn.Module):
    def __init__(self, c_out=8):
        super().__init__()
        self.conv = nn.Conv2d(3, c_out, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def _inference(module):
    return module.eval().requires_grad_(False)


def test_channels_last_outputs_change_the_user_visible_strides():
    eager, ours, zoo = _layout_both(zoo_layout.ChannelsLastOutputsLayout,
                                    _inference(_ConvRelu()), torch.randn(2, 3, 6, 6))
    assert ours.stride() == eager.stride() and torch.allclose(ours, eager, atol=1e-6)
    assert torch.allclose(zoo, eager, atol=1e-6) and zoo.stride() != eager.stride()


class _ConvAsStrided(_ConvRelu):
    def forward(self, x):
        y = self.conv(x)
        return torch.as_strided(y, (2, 8 * 36), (8 * 36, 1))  # eager's contiguous memory


def test_views_read_channels_last_read_the_wrong_memory():
    eager, ours, zoo = _layout_both(zoo_layout.ViewsReadChannelsLastLayout,
                                    _inference(_ConvAsStrided()), torch.randn(2, 3, 6, 6))
    assert torch.allclose(ours, eager, atol=1e-6)
    assert not torch.allclose(zoo, eager, atol=1e-6)


class _ConvOfChannelsLast(_ConvRelu):
    def forward(self, x):
        y = self.conv(x)  # x channels-last: eager's y is channels-last
        return torch.as_strided(y, (2, 8 * 36), (8 * 36, 1))


def test_eager_taken_as_contiguous_reads_other_elements():
    x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last)
    eager, ours, zoo = _layout_both(zoo_layout.EagerTakenAsContiguousLayout,
                                    _inference(_ConvOfChannelsLast()), x)
    assert torch.allclose(ours, eager, atol=1e-6)
    assert not torch.allclose(zoo, eager, atol=1e-6)


class _ConvCat(_ConvRelu):
    def forward(self, x):
        y = self.conv(x)
        return torch.cat([y, y], 1)


def test_cat_output_contiguous_changes_the_strides():
    x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last)
    eager, ours, zoo = _layout_both(zoo_layout.CatOutputContiguousLayout,
                                    _inference(_ConvCat()), x)
    assert eager.is_contiguous(memory_format=torch.channels_last)
    assert ours.stride() == eager.stride() and torch.allclose(ours, eager, atol=1e-6)
    assert zoo.stride() != eager.stride() and torch.allclose(zoo, eager, atol=1e-6)

