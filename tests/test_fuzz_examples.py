"""A failing example is kept as code where its printed call rebuilds it exactly
(refimpl.fuzz.examples.same_value is strict about what "exactly" means), else pickled."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
from torch import nn

from refimpl.expect import precision
from refimpl.fuzz.examples import describe_call, rebuilds_exactly, same_value


@dataclass(frozen=True)
class Spec:
    n: int
    scale: float
    ops: tuple[str, ...]


def test_same_value_tells_apart_what_a_repr_can_blur():
    assert same_value(Spec(2, 0.5, ("sin",)), Spec(2, 0.5, ("sin",)))
    assert not same_value(Spec(2, 0.0, ()), Spec(2, -0.0, ()))  # 0.0 == -0.0 in Python
    assert same_value(math.nan, math.nan)
    assert not same_value(1, 1.0) and not same_value(True, 1)
    assert not same_value((1, 2), [1, 2])
    x = torch.arange(6.0).reshape(2, 3)
    assert same_value(x, x.clone())
    assert not same_value(x.t().contiguous(), x.t())  # equal values, other strides
    assert not same_value(x, x.double())
    assert same_value(torch.tensor([math.nan, 1.0]), torch.tensor([math.nan, 1.0]))
    assert not same_value(torch.tensor([math.nan]), torch.tensor([0.0]))
    linear = nn.Linear(2, 3)
    assert not same_value(linear, linear)  # a module's weights are never in its repr


def test_a_printed_call_rebuilds_a_dataclass_exactly_and_not_a_cut_tensor():
    module = sys.modules[__name__]
    spec = {"spec": Spec(3, -0.0, ("cos", "sin"))}
    assert rebuilds_exactly(describe_call("prop", spec), spec, module)
    long = {"x": torch.ones(5000)}  # its repr is cut with "..."
    assert not rebuilds_exactly(describe_call("prop", long), long, module)
    module_arg = {"m": nn.Linear(2, 2)}  # evaluates, to other weights
    assert not rebuilds_exactly(describe_call("prop", module_arg), module_arg, module)


def test_the_precision_fixture_prints_as_code_a_reproducer_can_evaluate():
    """The layout properties take ``refimpl_precision``; its value prints as
    ``Precision(tf32=False)``, which the replay's namespace resolves even where the property
    module does not import it, so a layout example stays code only (no pickle)."""
    namespace = sys.modules[__name__]
    assert "Precision" not in vars(namespace)
    for value in (precision.Precision(), precision.Precision(tf32=True)):
        arguments = {"refimpl_precision": value, "device": "cpu"}
        assert rebuilds_exactly(describe_call("prop", arguments), arguments, namespace)
