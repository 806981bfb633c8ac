"""Property: the backend's ``checkpoint`` refuses bad input where it is given, naming it, and
leaves nothing of the refused call behind.

torch documents ``checkpoint(module, *, use_reentrant=False, preserve_rng_state=True,
context_fn=None, determinism_check="default", debug=False, early_stop=True)`` for the
composable checkpoint: ``module`` an ``nn.Module``, applied once; ``preserve_rng_state``,
``debug`` and ``early_stop`` booleans; ``determinism_check`` one of ``"default"`` and
``"none"``; ``context_fn`` a callable; ``use_reentrant`` only False; no other keyword.

* A bad option (one of :data:`BAD_OPTIONS`, given among 1-3 valid ones in a drawn order) is
  refused by ``checkpoint(...)`` or at the latest by the first forward, with a one-line
  error that names the option and is an instance of the class torch 2.13 raises where it
  refuses that option (code catching torch's class catches the backend's; a bad boolean:
  TypeError or ValueError). The module is then not checkpointed: the backend checkpoints it
  with valid options afterwards, and that step gives the unwrapped module's gradients.
* A misuse of the wrapper (:data:`MISUSES`): ``module`` that is not an ``nn.Module`` (a
  number, a string, None, a module class, a list of modules, a function, a tensor) is a
  one-line TypeError naming ``module``; a second ``checkpoint`` of one module is a one-line
  error (ValueError or AssertionError, torch's class) and leaves the first in force (the
  next step gives the unwrapped gradients, its recomputation running as the first options
  say); a checkpointed module calling itself inside its own forward is a one-line
  RuntimeError or AssertionError, leaves no saved-tensor hooks behind, and the next
  ordinary step gives the unwrapped gradients.

Only where the backend's ``checkpoint`` takes options (refimpl and torch's composable
checkpoint); the others skip, visibly. The ``torch`` target fails both properties
(docs/findings.md, "Checkpoint": booleans taken by truth value, ``use_reentrant=None``,
errors that do not name the argument or span lines).

Reach (each example): for the options, the bad option comes with a valid one (a check that
stops at the first option it reads could miss it); for the misuses, the refused call is one
a looser check lets through (a module class, a list of modules or a callable for
``module``; the second ``checkpoint`` or the inner call after a step that ran).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from torch import nn

from refimpl.oracle import component
from refimpl.oracle.blame import TargetError
from refimpl.properties.reach import reach

WIDTH = 3
_BOOLEAN = (TypeError, ValueError)

#: option -> [(label, bad value)]; each is refused (module docstring)
BAD_OPTIONS: dict[str, list[tuple[str, Any]]] = {
    "preserve_rng_state": [("the string 'no'", "no"), ("0", 0), ("None", None),
                           ("1.0", 1.0)],
    "debug": [("the string 'yes'", "yes"), ("1", 1), ("0", 0), ("None", None)],
    "early_stop": [("the string 'no'", "no"), ("None", None), ("0", 0)],
    "determinism_check": [("'strict'", "strict"), ("'Default'", "Default"), ("None", None),
                          ("''", "")],
    "context_fn": [("3", 3), ("a string", "abc"), ("a pair of contexts, not a callable",
                                                   (contextlib.nullcontext(),) * 2)],
    "use_reentrant": [("True", True), ("the string 'no'", "no"), ("None", None), ("1", 1),
                      ("0", 0)],
}
#: unknown keyword names, each refused as torch does (ValueError)
UNKNOWN_NAMES = ("use_reentrent", "preserve_rng", "foo", "policy_fn")
#: the class torch 2.13 raises where it refuses the option (None: torch takes it silently)
TORCH_CLASS: dict[str, tuple[type[BaseException], ...]] = {
    "preserve_rng_state": _BOOLEAN, "debug": _BOOLEAN, "early_stop": _BOOLEAN,
    "determinism_check": (ValueError,), "context_fn": (TypeError,),
    "use_reentrant": (NotImplementedError,), "unknown": (ValueError,),
}
#: valid values of each option, drawn next to the bad one
VALID: dict[str, list[Any]] = {
    "preserve_rng_state": [True, False], "debug": [True, False], "early_stop": [True, False],
    "determinism_check": ["default", "none"], "use_reentrant": [False],
    "context_fn": [None, lambda: (contextlib.nullcontext(), contextlib.nullcontext())],
}


def _block() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH))


def _input() -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, 2 * WIDTH).reshape(2, WIDTH).requires_grad_()


def _grads(model: nn.Module) -> list[torch.Tensor]:
    """One step from cleared gradients (``tanh``'s saves make a checkpoint recompute):
    every parameter's gradient and the input's."""
    model.zero_grad(set_to_none=True)
    x = _input()
    model(x).square().sum().backward()
    return [p.grad for p in model.parameters()] + [x.grad]


def _takes_options(backend) -> bool:
    kinds = {p.kind for p in inspect.signature(backend.checkpoint).parameters.values()}
    return inspect.Parameter.VAR_KEYWORD in kinds


def _hooks_left() -> bool:
    return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None


def _raised(run: Callable[[], Any]) -> BaseException | None:
    """What ``run()`` raised (the backend's own exception, not the harness's wrapper)."""
    try:
        run()
    except TargetError as error:
        return error.__cause__
    except Exception as error:  # the property judges what was raised
        return error
    return None


def _assert_refused(error: BaseException | None, classes: tuple[type[BaseException], ...],
                    names: str, what: str) -> None:
    """A one-line error of one of ``classes`` whose message names ``names``."""
    assert error is not None, f"{what}: accepted, expected a refusal naming {names!r}"
    text = str(error).strip()
    assert isinstance(error, classes), (
        f"{what}: raised {type(error).__name__}: {text}; expected one of "
        f"{[c.__name__ for c in classes]}")
    assert text and "\n" not in text, f"{what}: the error is not one line: {text!r}"
    assert names in text, f"{what}: the error does not name {names!r}: {text}"


@st.composite
def bad_options(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """(the refused name, the keyword arguments in call order): one bad option or unknown
    name among 1-3 valid options, in a drawn order (alone: the explicit examples)."""
    bad = draw(st.sampled_from([*sorted(BAD_OPTIONS), "unknown"]), label="refused option")
    if bad == "unknown":
        name, value = draw(st.sampled_from(UNKNOWN_NAMES), label="unknown name"), True
    else:
        name = bad
        value = draw(st.sampled_from(BAD_OPTIONS[bad]), label="bad value")[1]
    others = draw(st.lists(st.sampled_from(sorted(set(VALID) - {name})), min_size=1,
                           max_size=3, unique=True), label="valid options")
    kwargs = {other: draw(st.sampled_from(VALID[other])) for other in others}
    at = draw(st.integers(0, len(kwargs)), label="position of the bad option")
    items = list(kwargs.items())
    items.insert(at, (name, value))
    return bad, dict(items)


@example(case=("unknown", {"debug": True, "foo": 1}))
@example(case=("use_reentrant", {"use_reentrant": None}))
@example(case=("use_reentrant", {"determinism_check": "none", "use_reentrant": True}))
@example(case=("preserve_rng_state", {"early_stop": False, "preserve_rng_state": "no"}))
@given(case=bad_options())
def test_bad_options_are_refused_naming_them(refimpl_backend, case) -> None:
    if not _takes_options(refimpl_backend):
        pytest.skip(f"backend {refimpl_backend.name!r}: checkpoint(module) takes no options")
    bad, kwargs = case
    reach(len(kwargs) > 1)
    apply = component(refimpl_backend, "checkpoint")
    name = next(n for n in kwargs if n == bad or (bad == "unknown" and n not in VALID))
    given_as = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    what = f"{refimpl_backend.name} checkpoint({given_as})"
    module = _block()
    holder: list[nn.Module] = []
    error = _raised(lambda: holder.append(apply(module, **kwargs) or module))
    if error is None:  # refused at the latest by the first forward
        error = _raised(lambda: holder[0](_input()).sum().backward())
    _assert_refused(error, TORCH_CLASS[bad], name, what)
    assert not _hooks_left(), f"{what}: saved-tensor hooks left behind"
    if holder:  # taken, then refused in the forward: the module is the backend's now
        return
    model = apply(module) or module
    assert all(torch.equal(a, b) for a, b in zip(_grads(_block()), _grads(model))), \
        f"{what}: after the refusal, a checkpoint with no options gives other gradients"


class _CallsItself(nn.Module):
    """A block whose forward calls the module itself once more, when ``again`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.block = _block()
        self.again = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.again:
            self.again = False
            x = self(x)
        return self.block(x)


#: value given as ``module`` -> whether a looser check (a class, a sequence, a callable)
#: would take it
NOT_MODULES: dict[str, tuple[Callable[[], Any], bool]] = {
    "a number": (lambda: 3, False),
    "a string": (lambda: "Linear", False),
    "None": (lambda: None, False),
    "a tensor": (lambda: torch.ones(2), False),
    "the class nn.Linear": (lambda: nn.Linear, True),
    "a list of modules": (lambda: [nn.Linear(2, 2), nn.Tanh()], True),
    "a function returning a module": (lambda: _block, True),
}
MISUSES = ("module=", "applied twice", "called inside its own forward")


def _not_a_module(apply, label: str) -> bool:
    make, loose = NOT_MODULES[label]
    value = make()
    _assert_refused(_raised(lambda: apply(value)), (TypeError,), "module",
                    f"checkpoint(module={label})")
    return loose


def _applied_twice(apply, first: dict[str, Any], second: dict[str, Any], what: str) -> None:
    """The second ``checkpoint`` of one module is refused; the first stays in force."""
    module = _Counting()
    model = apply(module, **first) or module
    _grads(model)
    _assert_refused(_raised(lambda: apply(model, **second)), (ValueError, AssertionError),
                    "checkpoint", what)
    before = module.completed
    assert all(torch.equal(a, b) for a, b in zip(_grads(_Counting()), _grads(model))), \
        f"{what}: after the refusal, the step's gradients differ from the unwrapped module's"
    runs = module.completed - before
    want = 2 if first.get("early_stop") is False else 1
    assert runs == want, (f"{what}: after the refusal, a step ran the module to its end "
                          f"{runs} times; the first checkpoint's options say {want}")


class _Counting(nn.Module):
    """The block, counting the calls that reach its end (a recomputation that stops early
    does not: ``tanh`` saves its output, then a linear runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.block = _block()
        self.completed = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        self.completed += 1
        return out


def _calls_itself(apply, what: str) -> None:
    """The inner call is refused; nothing is left behind; the next step is eager's."""
    module = _CallsItself()
    model = apply(module) or module
    _grads(model)
    module.again = True
    _assert_refused(_raised(lambda: model(_input())), (RuntimeError, AssertionError),
                    "checkpoint", what)
    assert not _hooks_left(), f"{what}: saved-tensor hooks left behind"
    plain = _CallsItself()
    assert all(torch.equal(a, b) for a, b in zip(_grads(plain), _grads(model))), \
        f"{what}: after the refusal, the step's gradients differ from the unwrapped module's"


@example(misuse="applied twice", value="None", early_stop=False, debug=True)
@example(misuse="called inside its own forward", value="None", early_stop=True, debug=False)
@example(misuse="module=", value="the class nn.Linear", early_stop=True, debug=False)
@given(misuse=st.sampled_from(MISUSES), value=st.sampled_from(sorted(NOT_MODULES)),
       early_stop=st.booleans(), debug=st.booleans())
def test_misuse_is_refused_and_leaves_nothing(refimpl_backend, misuse: str, value: str,
                                             early_stop: bool, debug: bool) -> None:
    if not _takes_options(refimpl_backend):
        pytest.skip(f"backend {refimpl_backend.name!r}: checkpoint(module) takes no options")
    apply = component(refimpl_backend, "checkpoint")
    what = f"{refimpl_backend.name} checkpoint, {misuse}"
    if misuse == "module=":
        reach(NOT_MODULES[value][1])
        _not_a_module(apply, value)
    elif misuse == "applied twice":
        reach(True)
        _applied_twice(apply, {"early_stop": early_stop}, {"debug": debug}, what)
    else:
        reach(True)
        _calls_itself(apply, what)
