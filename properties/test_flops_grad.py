"""``torch.autograd.grad`` is counted and attributed as ``.backward()`` is.

A training loop may take its gradients with ``torch.autograd.grad`` (higher-order
gradients, gradient penalties, functional optimisers) instead of ``.backward()``. The same
gradients cost the same FLOPs, and the modules whose backward runs are the same, so a
counter must report the same per-module counts for both. Each example draws a tree of
nested modules (:mod:`refimpl.strategies.flop_trees`: every op family of the table, some
containers compiled) and runs it forward, then takes the gradients of the output's sum with
respect to every parameter (and the input, when it requires grad) through
``torch.autograd.grad``. The per-module totals must equal the hand count of a forward and
backward run (:func:`refimpl.expect.flops.tree_module_flops`, mode "backward").

Reach: some module holds more than 0 and less than "Global".

Against torch (``--refimpl-target torch``, 2.13) this fails: torch's counter raises inside
``torch.autograd.grad`` when a module's input is a leaf that requires grad
(docs/findings.md, FLOPs 8), and it counts some families differently (the module
attribution property's notes, test_flops_modules.py).
"""

from __future__ import annotations

import warnings

import torch
from hypothesis import given

from refimpl.expect.flops import tree_module_flops
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.flop_trees import ModuleTree, module_trees


def _grad(model: torch.nn.Module, x: torch.Tensor) -> None:
    """Forward, then autograd.grad of the output's sum for the parameters (and ``x``)."""
    out = model(x)
    wrt = [p for p in model.parameters() if p.requires_grad] + ([x] if x.requires_grad else [])
    if out.requires_grad and wrt:
        torch.autograd.grad(out.sum(), wrt, allow_unused=True)


@given(module_trees())
def test_autograd_grad_counts_as_backward(refimpl_backend, tree: ModuleTree):
    expected = tree_module_flops(tree, "backward")
    reach(any(0 < n < expected.get("Global", 0) for n in expected.values()))
    model, x = tree.build(), tree.inputs()
    with warnings.catch_warnings():
        # torch warns that global module hooks fire for the OptimizedModule wrapper too
        warnings.simplefilter("ignore", UserWarning)
        with component(refimpl_backend, "flop_counter")(display=False) as counter:
            _grad(model, x)
    totals = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    observed = {name: n for name, n in totals.items() if n}
    wrong = {name: (observed.get(name), expected.get(name))
             for name in sorted(set(observed) | set(expected))
             if observed.get(name) != expected.get(name)}
    assert not wrong, (f"{refimpl_backend.name}: per-module FLOPs under autograd.grad differ "
                       f"from the hand count for {tree!r}; {{module: (counted, expected)}}: "
                       f"{wrong}")
