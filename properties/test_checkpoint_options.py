"""Property: the backend's ``checkpoint(module, **options)`` does what each option documents,
under every combination of ``preserve_rng_state``, ``early_stop`` and ``determinism_check``.

torch documents the composable checkpoint's options (``torch.utils.checkpoint``):

* ``preserve_rng_state=True`` stashes the RNG state before the forward and restores it for
  the recomputation, so a dropout draws the forward's mask again and the caller's RNG stream
  after the step is the unwrapped run's; with ``False`` the recomputation draws from the
  stream as it is then (it advances the stream a second time).
* ``early_stop=True`` ends the recomputation at the save that matches the forward's last
  one: the code after it never runs again. With ``False`` the whole call runs again, and a
  recomputation that saves *more* than the forward is a ``CheckpointError`` under
  ``determinism_check="default"``.
* ``determinism_check="none"`` turns that check off: refimpl ignores the extra saves
  (docs/differences.md, "Checkpoint"), torch still raises its ``CheckpointError``; either is
  allowed, never another exception.
* The ``determinism_check`` value is a string built at run time, as a program reads it from
  a config file: equal to ``"default"`` or ``"none"``, never the interned literal.

The module (:class:`Program`) runs drawn ops of ``refimpl.strategies.drifts`` (after a
dropout in half the draws) and, when called again inside a backward, those ops and then a
drawn extension (possibly empty). It counts the runs that reach its end. Each example runs
all eight combinations of the three options on the same program. Expectations come
from the unwrapped module alone: its saves counted by
:func:`refimpl.expect.checkpoint_debug.timeline` (forward, and forward plus extension), its
gradients and RNG state after one step, and its RNG state after two forwards.

* The error: a ``CheckpointError`` iff the check is on, early stop is off and the extended
  program saves more than the forward (which saves something); under ``"none"`` there, no
  error or a ``CheckpointError``; else none.
* Runs that reach the end: 1 when the forward saves nothing (nothing to recompute) or early
  stop is on; 2 otherwise.
* The caller's RNG state after the step: the unwrapped step's, but with
  ``preserve_rng_state=False``, a dropout and a recomputation, the state after two unwrapped
  forwards.
* Output and gradients of the parameter and the input equal the unwrapped module's bit for
  bit (NaN where it has NaN), unless a dropout is recomputed without its RNG state.

A second property gives ``context_fn`` results that are not a tuple of two context managers:
the forward must refuse each with a one-line TypeError or ValueError naming ``context_fn``
and leave no saved-tensor hooks behind. It fails on the ``torch`` target, which checks
nothing of the result (docs/findings.md, "Checkpoint").

Only where the backend's ``checkpoint`` takes options (refimpl and ``torch``'s composable
checkpoint); the others skip, visibly.

Reach (each example): the forward saves a tensor, so the backward recomputes; for the second
property, the wrong result is a tuple (a check of its type alone lets it through).
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
from dataclasses import dataclass

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from torch.nn import functional as F
from torch.utils import checkpoint as tuc

from refimpl.expect.checkpoint_debug import timeline
from refimpl.oracle import component
from refimpl.properties.reach import note, reach
from refimpl.strategies.drifts import OPS, Drift, DriftingModule

#: the seed of every step (the dropout's masks)
SEED = 11
#: the ops of the drift table that save a tensor for backward
SAVING = ("exp", "mul", "sin", "square")
BATCH = 2


class Program(DriftingModule):
    """A :class:`DriftingModule` after an optional dropout, counting the runs that reach
    its end (``completed``)."""

    def __init__(self, drift: Drift, random: bool) -> None:
        super().__init__(drift)
        self.random = random
        self.completed = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.dropout(x, 0.5) if self.random else x
        out = super().forward(h)
        self.completed += 1
        return out


@dataclass(frozen=True)
class Case:
    """One example: the programs and the dropout (every combination of options is run)."""

    ops: tuple[str, ...]
    extension: tuple[str, ...]
    random: bool
    width: int

    def module(self) -> Program:
        drift = Drift(self.ops, self.ops + self.extension, False, "extend", self.width)
        return Program(drift, self.random)

    def input(self) -> torch.Tensor:
        x = torch.linspace(-1.0, 1.0, BATCH * self.width).reshape(BATCH, self.width)
        return x.requires_grad_()


@dataclass(frozen=True)
class Options:
    """One combination of the three options."""

    preserve_rng_state: bool
    early_stop: bool
    determinism_check: str


#: every combination, each run on every example
COMBINATIONS = [Options(*c) for c in itertools.product((True, False), (True, False),
                                                        ("default", "none"))]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A program that saves something (its first op does: a recomputation happens), an
    extension of 0-3 ops, a dropout first in half the draws."""
    names = st.sampled_from(sorted(OPS))
    first = draw(st.sampled_from(sorted(SAVING)), label="first op")
    return Case(ops=(first, *draw(st.lists(names, max_size=3), label="more ops")),
                extension=tuple(draw(st.lists(names, max_size=3), label="extension")),
                random=draw(st.booleans(), label="dropout first"),
                width=draw(st.integers(1, 3), label="width"))


@dataclass
class Step:
    """What one step gave: the error, the output, the gradients, the RNG state after."""

    error: Exception | None
    out: torch.Tensor | None
    grads: tuple[torch.Tensor | None, torch.Tensor | None]
    rng_after: torch.Tensor
    completed: int


def _step(module: Program, run, x: torch.Tensor) -> Step:
    """Seed, forward, backward of ``out.square().sum()``; what it gave."""
    torch.manual_seed(SEED)
    try:
        out = run(x)
        out.square().sum().backward()
    except Exception as error:  # the property judges what was raised
        return Step(error, None, (None, None), torch.get_rng_state(), module.completed)
    return Step(None, out.detach(), (module.w.grad, x.grad), torch.get_rng_state(),
                module.completed)


def _saves(case: Case, again: bool) -> int:
    """How many tensors the unwrapped module saves running the forward's program, or (again)
    the recomputation's."""
    module = case.module()
    module.recomputing = lambda: again
    return len(timeline(lambda: module(case.input())).saves)


def _rng_after_two_forwards(case: Case) -> torch.Tensor:
    module = case.module()
    module.recomputing = lambda: False
    torch.manual_seed(SEED)
    with torch.no_grad():
        module(case.input())
        module(case.input())
    return torch.get_rng_state()


def _as_read(text: str) -> str:
    """``text`` as a program reads it from a config file or a command line: an equal string
    built at run time, not the interned literal (an option compared by identity shows)."""
    built = "".join([text[:1], text[1:]])
    assert built == text and built is not text, "the option string is not a fresh object"
    return built


def _takes_options(backend) -> bool:
    kinds = {p.kind for p in inspect.signature(backend.checkpoint).parameters.values()}
    return inspect.Parameter.VAR_KEYWORD in kinds


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Equal dtype, shape and bits, NaN equal to NaN."""
    if a is None or b is None:
        return a is b
    return a.dtype == b.dtype and a.shape == b.shape and bool(
        torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num()))


@given(case=cases())
def test_options_as_documented(refimpl_backend, case: Case) -> None:
    if not _takes_options(refimpl_backend):
        pytest.skip(f"backend {refimpl_backend.name!r}: checkpoint(module) takes no options")
    apply = component(refimpl_backend, "checkpoint")
    n_forward, n_recompute = _saves(case, again=False), _saves(case, again=True)
    reach(n_forward > 0)
    note(f"{min(n_recompute - n_forward, 2)}{'+' if n_recompute - n_forward >= 2 else ''} "
         "extra saves in the recomputation")
    plain = case.module()
    plain.recomputing = lambda: False
    want = _step(plain, plain, case.input())
    for options in COMBINATIONS:
        module = case.module()
        wrapped = apply(module, preserve_rng_state=options.preserve_rng_state,
                        early_stop=options.early_stop,
                        determinism_check=_as_read(options.determinism_check)) or module
        got = _step(module, wrapped, case.input())
        _judge(case, options, (n_forward, n_recompute), want, got,
               f"{refimpl_backend.name} checkpoint, {case}, {options}")


def _judge(case: Case, options: Options, saves: tuple[int, int], want: Step, got: Step,
           what: str) -> None:
    """One combination's step against the expectations of the module docstring."""
    n_forward, n_recompute = saves
    recomputes = n_forward > 0
    saves_more = recomputes and not options.early_stop and n_recompute > n_forward
    if saves_more and options.determinism_check == "default":
        assert isinstance(got.error, tuc.CheckpointError), (
            f"{what}: the recomputation saves {n_recompute} tensors, the forward {n_forward}: "
            f"expected a CheckpointError, got {got.error!r}")
        return
    if got.error is not None and saves_more and isinstance(got.error, tuc.CheckpointError):
        note("determinism_check='none': extra saves refused (torch's rule)")
        return
    assert got.error is None, f"{what}: expected no error, got {got.error!r}"
    runs = 1 if options.early_stop or not recomputes else 2
    assert got.completed == runs, (
        f"{what}: the module's end was reached {got.completed} times, expected {runs}")
    redrawn = case.random and recomputes and not options.preserve_rng_state
    rng = _rng_after_two_forwards(case) if redrawn else want.rng_after
    assert torch.equal(got.rng_after, rng), (
        f"{what}: the caller's RNG state after the step is not the "
        f"{'two unwrapped forwards' if redrawn else 'unwrapped step'}'s")
    if redrawn:  # a dropout recomputed without its RNG state: other masks
        return
    assert _same(want.out, got.out), f"{what}: output {got.out}, expected {want.out}"
    for name, a, b in zip(("w", "input"), want.grads, got.grads):
        assert _same(a, b), f"{what}: gradient of {name} is {b}, expected the unwrapped {a}"


class _EnterOnly:
    """Half a context manager: ``__enter__`` without ``__exit__``."""

    def __enter__(self):
        return self


class _ExitOnly:
    """Half a context manager: ``__exit__`` without ``__enter__``."""

    def __exit__(self, *exc_info):
        return False


#: context_fn results that are not a tuple of two context managers, by what is wrong
NOT_A_PAIR = {
    "__enter__ without __exit__ as the recomputation's":
        lambda: (contextlib.nullcontext(), _EnterOnly()),
    "__exit__ without __enter__ as the forward's": lambda: (_ExitOnly(), contextlib.nullcontext()),
    "three context managers": lambda: (contextlib.nullcontext(),) * 3,
    "one context manager in a tuple": lambda: (contextlib.nullcontext(),),
    "an empty tuple": lambda: (),
    "a number as the recomputation's": lambda: (contextlib.nullcontext(), 5),
    "a number as the forward's": lambda: (5, contextlib.nullcontext()),
    "a list of two": lambda: [contextlib.nullcontext(), contextlib.nullcontext()],
    "one context manager": lambda: contextlib.nullcontext(),
}


def _hooks_left() -> bool:
    return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None


def _every_wrong_result(test):
    """Each of :data:`NOT_A_PAIR` as an explicit example, every run (15 drawn examples of 9
    kinds can leave one out)."""
    for wrong in sorted(NOT_A_PAIR):
        test = example(wrong=wrong, width=1)(test)
    return test


@_every_wrong_result
@given(wrong=st.sampled_from(sorted(NOT_A_PAIR)), width=st.integers(1, 3))
def test_context_fn_not_returning_a_pair_is_refused(refimpl_backend, wrong: str,
                                                     width: int) -> None:
    """torch documents ``context_fn`` as "a callable returning a tuple of two context
    managers". Bad input is refused where it is given, naming it: a ``context_fn`` whose
    result is not such a tuple makes the checkpointed forward raise a TypeError or ValueError
    naming ``context_fn``, leaves no saved-tensor hooks behind, and does so again on the next
    call (nothing of the failed call is left in the module). Reach: the result is a tuple
    (a check of the type alone would let it through)."""
    if not _takes_options(refimpl_backend):
        pytest.skip(f"backend {refimpl_backend.name!r}: checkpoint(module) takes no options")
    reach(isinstance(NOT_A_PAIR[wrong](), tuple))
    apply = component(refimpl_backend, "checkpoint")
    module = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh())
    model = apply(module, context_fn=NOT_A_PAIR[wrong]) or module
    what = f"{refimpl_backend.name} checkpoint with a context_fn returning {wrong}"
    for call in (1, 2):
        x = torch.ones(2, width, requires_grad=True)
        with pytest.raises((TypeError, ValueError), match="context_fn") as raised:
            model(x)
        assert not _hooks_left(), f"{what}: saved-tensor hooks left after call {call}"
        assert "\n" not in str(raised.value).strip(), \
            f"{what}: the error is not one line: {raised.value}"
