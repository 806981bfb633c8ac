"""Issue 21, item 2: one compiled function called with ten input shapes compiles with dynamic
shapes after the first size mismatch (as ``torch.compile`` does) and keeps refimpl's plan,
through ``refimpl.compile`` and through ``torch.compile(backend=DynamoBackend(...))``; the
dynamic graph's plan is made on the sizes of the call that compiled it."""

from __future__ import annotations

import torch

import refimpl
from refimpl.partition.backend import DynamoBackend
from refimpl.partition.options import PartitionOptions

SIZES = range(2, 12)


def sin_twice(x):
    return x.sin() * 2


def wide(x, w):
    return (x @ w).cos().cos().sum()


def test_issue_21_ten_shapes_through_refimpl_compile():
    compiled = refimpl.compile(sin_twice, memory_budget=0.5)
    for n in SIZES:
        x = torch.randn(n, requires_grad=True)
        compiled(x).sum().backward()
        torch.testing.assert_close(x.grad, 2 * x.detach().cos())


def test_issue_21_ten_shapes_through_the_dynamo_backend_keep_the_plan():
    plans = []
    backend = DynamoBackend(PartitionOptions(memory_budget=0.5), on_plan=plans.append)
    compiled = torch.compile(sin_twice, backend=backend)
    for n in SIZES:
        x = torch.randn(n, requires_grad=True)
        compiled(x).sum().backward()
        torch.testing.assert_close(x.grad, 2 * x.detach().cos())
    assert backend.compiled == 2  # the first size, then one dynamic graph for the rest
    assert len(plans) == 2


def test_dynamic_plan_is_made_on_the_sizes_of_the_compiling_call():
    plans = []
    backend = DynamoBackend(PartitionOptions(memory_budget=0.3, optimize_layout=False),
                            on_plan=plans.append)
    compiled = torch.compile(wide, backend=backend)
    w = torch.randn(16, 16, requires_grad=True)
    for n in (4, 12):  # the second call compiles the dynamic graph
        compiled(torch.randn(n, 16, requires_grad=True), w).backward()
    static = refimpl.explain(wide, torch.randn(12, 16, requires_grad=True), w,
                             memory_budget=0.3)
    dynamic = plans[-1]
    assert (dynamic.min_bytes, dynamic.max_bytes, dynamic.bound_bytes) == (
        static.min_bytes, static.max_bytes, static.bound_bytes)
    assert dynamic.max_bytes > plans[0].max_bytes  # not the first call's (4-row) sizes
