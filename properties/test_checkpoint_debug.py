"""Property: the backend's checkpoint in debug mode reports a non-deterministic recomputation
as torch documents it: a ``CheckpointError`` whose message traces the ops of the forward and
of the recomputation.

The module (``refimpl.strategies.drifts``) runs one program in its forward and another when
called again inside a backward (truncated, extended, one op replaced, or its input doubled).
Debug mode is on: ``checkpoint(module, debug=True)`` where the backend's checkpoint takes
options, else ``torch.utils.checkpoint.set_checkpoint_debug_enabled(True)`` around the step.
The expectation (:func:`refimpl.expect.checkpoint_debug.expected_report`) comes from the
unwrapped module's own op logs and saves, never from a checkpoint.

* Where the check fires (torch's rule, with early stop: fewer saves, or saves of another
  shape, dtype or device), the backward raises ``torch.utils.checkpoint.CheckpointError``
  and its message names the forward's aten ops, then the recomputation's (at least those run
  before an early stop), in order.
* Where the backend promises refimpl's report (``debug_lists_runs``): the recomputation runs
  to its end (a recomputation that only saves more is caught too), and the report names the
  first op at which the two logs part and lists both logs exactly.

It passes on the torch targets ``torch-checkpoint`` and ``checkpoint-wrapper`` (torch's own
debug mode, through the global switch). It fails on the ``torch`` target, whose composable
``checkpoint(m, debug=True)`` always raises ``ValueError`` (docs/findings.md, "Checkpoint");
it skips where no determinism check (``torch-checkpoint-reentrant``) or no debug mode
(``torch-sac``: torch's debug mode rejects a ``context_fn``) is promised.

A second property runs a module whose recomputation is its forward (the drift's forward
program twice) with debug mode on: logging only observes, so the step gives the unwrapped
module's output (dtype included: ``double`` passes its dtype as a keyword) and gradients bit
for bit (NaN where it has NaN), and raises nothing. It passes and fails on the same targets
as the first, for the same reasons.

Reach (each example): the two runs' op logs differ (not only their tensors' shapes); for the
second property, the forward saves a tensor (the backward recomputes under the log).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import re
from collections.abc import Iterator

import pytest
import torch
from hypothesis import assume, example, given
from torch.utils import checkpoint as tuc

from refimpl.expect.checkpoint import COMPOSABLE, CheckpointPromise
from refimpl.expect.checkpoint_debug import Report, expected_report, timeline
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.drifts import LONG, Drift, DriftingModule, drifts

#: an aten op as any report names it (``aten.sin.default``, ``torch._ops.aten.mul.Tensor``)
OP_NAME = re.compile(r"aten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+")
DETACH = "aten.detach."
BATCH = 2


def _input(drift: Drift) -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, BATCH * drift.width).reshape(BATCH, drift.width)


def _expected(drift: Drift) -> Report:
    """The report, from the unwrapped module run as the forward and as the recomputation."""
    lines = []
    for again in (False, True):
        module = DriftingModule(drift)
        module.recomputing = lambda again=again: again
        x = _input(drift).requires_grad_()
        lines.append(timeline(lambda module=module, x=x: module(x)))
    return expected_report(*lines)


def _takes_options(backend) -> bool:
    kinds = {p.kind for p in inspect.signature(backend.checkpoint).parameters.values()}
    return inspect.Parameter.VAR_KEYWORD in kinds


def _debug_step(backend, drift: Drift) -> BaseException | None:
    """One forward and backward of the checkpointed module with debug on; what it raised."""
    apply = component(backend, "checkpoint")
    module = DriftingModule(drift)
    options, switch = _debug_switch(backend)
    with switch:
        wrapped = (apply(module, debug=True) if options else apply(module)) or module
        x = _input(drift).requires_grad_()
        try:
            wrapped(x).sum().backward()
        except Exception as error:  # the property judges what was raised
            return error
    return None


def _debug_switch(backend):
    """How debug mode is turned on: the option (True) or torch's global switch (False); either
    way torch's op-logging logger is left as it was found (:func:`_op_logger_kept`)."""
    options = _takes_options(backend)
    switch = contextlib.nullcontext() if options else tuc.set_checkpoint_debug_enabled(True)
    return options, _op_logger_kept(switch)


@contextlib.contextmanager
def _op_logger_kept(inner) -> Iterator[None]:
    """Run ``inner`` and give torch's ``LoggingTensor`` logger back its propagation, level and
    filters.

    torch's debug mode never restores them (docs/findings.md, "Checkpoint": it leaves the
    logger non-propagating, at INFO, one filter more per run). pytest's log capture then hooks
    every non-propagating logger at the next test's start and fails on the records torch logs
    without placeholders, which made the next debug property fail on torch's own checkpoint:
    an artefact of the order tests run in, not of the backend under test.
    """
    logger = logging.getLogger("LoggingTensor")
    propagate, level, filters = logger.propagate, logger.level, list(logger.filters)
    try:
        with inner:
            yield
    finally:
        logger.propagate, logger.filters = propagate, filters
        logger.setLevel(level)


def _is_subsequence(want: list[str], have: list[str]) -> bool:
    rest = iter(have)
    return all(any(name == seen for seen in rest) for name in want)


def _assert_lists_runs(text: str, want: Report, what: str) -> None:
    """refimpl's report (``CheckpointPromise.debug_lists_runs``): where the logs part, then
    both logs exactly."""
    i, fwd, rec = want.first_difference, want.forward, want.recompute_to_end
    where = "the op logs are identical" if i is None else (
        f"first difference at op {i}: forward ran {fwd[i] if i < len(fwd) else '<end>'}, "
        f"recomputation ran {rec[i] if i < len(rec) else '<end>'}")
    assert where in text, f"{what}: the report does not say {where!r}:\n{text[-2000:]}"
    for title, ops in (("ops in the forward", fwd), ("ops in the recomputation", rec)):
        listing = f"{title} ({len(ops)}):\n" + "".join(f"  {op}\n" for op in ops)
        assert listing in text + "\n", \
            f"{what}: the report does not list {title} as {ops}:\n{text[-2000:]}"


def _mirrored(drift: Drift) -> list[Drift]:
    """The drift and, for a replaced op, the drift with its two programs exchanged: the two
    op names at the first difference then meet in both orders."""
    if drift.kind != "replace":
        return [drift]
    return [drift, Drift(drift.recompute, drift.forward, False, "replace", drift.width)]


#: the boundaries of the report's first difference, drawn or not: where the forward ends
#: (extended) and where the recomputation ends (truncated), both past 256 ops; identical op
#: logs (a doubled input no log sees), short and past 256 ops (equal lengths compared by
#: identity show); and a replaced op (each order of the two names).
BOUNDARIES = (
    Drift(("sin",) * LONG, ("sin",) * LONG + ("exp", "double"), False, "extend", 2),
    Drift(("mul", "exp") * (LONG // 2), ("mul", "exp") * (LONG // 2 - 1), False, "truncate", 1),
    Drift(("mul", "sin"), ("mul", "sin"), True, "widened", 2),
    Drift(("sin",) * LONG, ("sin",) * LONG, True, "widened", 1),
    Drift(("sin", "square"), ("double", "square"), False, "replace", 3),
)


def _boundaries(test):
    for drift in BOUNDARIES:
        test = example(drift=drift)(test)
    return test


@_boundaries
@given(drift=drifts())
def test_debug_mode_reports_the_ops_of_both_runs(refimpl_backend, drift: Drift) -> None:
    promise: CheckpointPromise = getattr(refimpl_backend, "checkpoint_promise", None) \
        or COMPOSABLE
    if not promise.checks_determinism:
        pytest.skip(f"backend {refimpl_backend.name!r} promises no determinism check")
    if not promise.debug_mode:
        pytest.skip(f"backend {refimpl_backend.name!r} promises no debug mode")
    cases = [(d, want) for d in _mirrored(drift) if _detected(want := _expected(d), promise)]
    assume(cases)
    reach(any(want.forward != want.recompute_to_end for _, want in cases))
    for case, want in cases:
        _check_report(refimpl_backend, promise, case, want)


def _detected(want: Report, promise: CheckpointPromise) -> bool:
    return want.detected_to_end if promise.debug_lists_runs else want.detected


def _check_report(backend, promise: CheckpointPromise, drift: Drift, want: Report) -> None:
    """One debug step of ``drift``: the error, its op trace and (refimpl's) its report."""
    what = (f"{backend.name} checkpoint, debug on: forward {list(drift.forward)[:8]}"
            f"{'...' if len(drift.forward) > 8 else ''} ({len(drift.forward)} ops), "
            f"recomputation {drift.kind} ({len(drift.recompute)} ops), doubled input "
            f"{drift.doubled}")
    error = _debug_step(backend, drift)
    assert isinstance(error, tuc.CheckpointError), \
        f"{what}: expected torch.utils.checkpoint.CheckpointError, got {error!r}"
    text = str(error)
    named = [name for name in OP_NAME.findall(text) if not name.startswith(DETACH)]
    assert _is_subsequence(want.forward + want.recompute_shown, named), (
        f"{what}: the report does not trace the forward's ops {want.forward} and then the "
        f"recomputation's {want.recompute_shown}; it names {named}")
    if promise.debug_lists_runs:
        _assert_lists_runs(text, want, what)


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Equal dtype, shape and bits, NaN equal to NaN."""
    if a is None or b is None:
        return a is b
    return a.dtype == b.dtype and a.shape == b.shape and bool(
        torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num()))


def _plain_step(module: DriftingModule, run, drift: Drift) -> tuple:
    """Forward and backward of ``run``: output, gradients of ``module.w`` and the input."""
    x = _input(drift).requires_grad_()
    out = run(x)
    out.square().sum().backward()
    return out.detach(), module.w.grad, x.grad


@given(drift=drifts())
def test_debug_mode_changes_no_result(refimpl_backend, drift: Drift) -> None:
    promise: CheckpointPromise = getattr(refimpl_backend, "checkpoint_promise", None) \
        or COMPOSABLE
    if not promise.debug_mode:
        pytest.skip(f"backend {refimpl_backend.name!r} promises no debug mode")
    same = Drift(drift.forward, drift.forward, False, "same", drift.width)
    reach(bool(timeline(lambda: DriftingModule(same)(_input(same).requires_grad_())).saves))
    plain = DriftingModule(same)
    plain.recomputing = lambda: False
    want = _plain_step(plain, plain, same)
    apply = component(refimpl_backend, "checkpoint")
    module = DriftingModule(same)
    options, switch = _debug_switch(refimpl_backend)
    with switch:
        wrapped = (apply(module, debug=True) if options else apply(module)) or module
        got = _plain_step(module, wrapped, same)
    what = f"{refimpl_backend.name} checkpoint, debug on, forward {list(same.forward)[:8]}"
    for name, a, b in zip(("output", "gradient of w", "input gradient"), want, got):
        assert _same(a, b), f"{what}: {name} is {b}, the unwrapped module's is {a}"
