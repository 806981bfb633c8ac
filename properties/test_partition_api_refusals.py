"""The backend under test's partitioner entry points refuse calls they cannot serve, with an
error whose first line names the argument (``fn=...``, ``fn must ...``; docs/design.md: bad
input is an error naming the argument, never a silent fallback).

Each example draws one misuse among the entry points the target has (``compile``, and where
present ``explain``, ``explain_many``, ``memory_efficient_fusion``):

* ``compile`` or ``memory_efficient_fusion`` of something not callable (an int, a string,
  a tensor): an error, at the latest at the first call (torch's own words, which name no
  argument: "'int' object is not callable", so none is asked);
* ``explain`` of a function these arguments do not fit (one argument too many): an error
  naming ``fn``;
* ``explain`` of a function whose result holds no tensor (a float): an error naming ``fn``;
* ``explain`` of a function of inputs none of which requires grad (no backward to plan): an
  error naming ``fn``;
* ``explain_many`` with ``memory_budgets`` a single number or a string: an error naming
  ``memory_budgets``.

Reach (``refimpl.properties.reach``): every example is a misuse.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.oracle import component
from refimpl.properties.reach import reach

NOT_CALLABLE = (3, "cos", torch.ones(2))


def cos_sum(x):
    return x.cos().sum()


def as_float(x):
    return float(x.cos().sum())


def grad_input(n: int) -> torch.Tensor:
    return torch.randn(n, 3, requires_grad=True)


def misuses(backend) -> list[str]:
    """The misuse kinds the target's entry points allow (module docstring)."""
    kinds = ["compile_not_callable"]
    if getattr(backend, "memory_efficient_fusion", None) is not None:
        kinds.append("fusion_not_callable")
    if getattr(backend, "explain", None) is not None:
        kinds += ["explain_wrong_args", "explain_no_tensor", "explain_no_grad"]
    if getattr(backend, "explain_many", None) is not None:
        kinds.append("explain_many_budgets")
    return kinds


def attempt(backend, kind: str, n: int, bad, budget: float):
    """Make the misuse ``kind``; return (the argument the error must name, or None, and
    the call)."""
    if kind == "compile_not_callable":
        compile_fn = component(backend, "compile")
        return None, lambda: compile_fn(bad, memory_budget=budget)(grad_input(n))
    if kind == "fusion_not_callable":
        return None, lambda: backend.memory_efficient_fusion(bad)(grad_input(n))
    if kind == "explain_wrong_args":
        return "fn", lambda: backend.explain(cos_sum, grad_input(n), grad_input(n),
                                             memory_budget=budget)
    if kind == "explain_no_tensor":
        return "fn", lambda: backend.explain(as_float, grad_input(n), memory_budget=budget)
    if kind == "explain_no_grad":
        return "fn", lambda: backend.explain(cos_sum, torch.randn(n, 3), memory_budget=budget)
    bad_budgets = budget if n % 2 else str(budget)  # a number, or a string
    return "memory_budgets", lambda: backend.explain_many(cos_sum, grad_input(n),
                                                          memory_budgets=bad_budgets)


@given(data=st.data(), n=st.integers(1, 4), bad=st.sampled_from(NOT_CALLABLE),
       budget=st.sampled_from([0.0, 0.5, 1.0]))
def test_partition_entry_points_refuse_misuse_naming_the_argument(refimpl_backend, data, n,
                                                                  bad, budget):
    kind = data.draw(st.sampled_from(misuses(refimpl_backend)), label="misuse")
    reach(True)
    name, call = attempt(refimpl_backend, kind, n, bad, budget)
    torch._dynamo.reset()
    try:
        call()
    except Exception as exc:  # the target's own type
        message = str(exc)
    else:
        raise AssertionError(f"{refimpl_backend.name}: misuse {kind} (n={n}, bad={bad!r}, "
                             f"budget={budget}) was accepted (expected an error naming "
                             f"{name})")
    if name is None:  # torch.compile's own refusal: any error will do
        return
    first = message.split("\n")[0]
    assert f"{name}=" in first or f"{name} must" in first, (
        f"{refimpl_backend.name}: misuse {kind} refused with {message!r} (expected its first "
        f"line to name {name})")
