"""A failing example is kept as code where its printed call rebuilds it exactly
(refimpl.fuzz.examples.same_value is strict about what "exactly" means), else pickled, else
as Hypothesis's choices, and the record says which."""

from __future__ import annotations

import math
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from hypothesis.core import decode_failure, encode_failure
from torch import nn

from refimpl.expect import precision
from refimpl.fuzz.examples import (
    build_some_kwargs,
    describe_call,
    examples_file,
    keep_arguments,
    kept_example,
    observed_choices,
    rebuilds_exactly,
    same_value,
)


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


class _Observation:
    """The part of a Hypothesis test-case observation that keep_arguments reads."""

    def __init__(self, decorator: str | None) -> None:
        self.metadata = types.SimpleNamespace(reproduction_decorator=decorator)


def test_the_choices_of_a_failing_test_case_are_read_from_its_observation():
    blob = encode_failure((True, 3, 0.5)).decode()
    seen = observed_choices(_Observation(f"@reproduce_failure('6.1.2', b'{blob}')"))
    assert seen == ("6.1.2", blob)
    assert decode_failure(seen[1].encode()) == (True, 3, 0.5)
    assert observed_choices(_Observation(None)) is None
    assert observed_choices(object()) is None


def test_each_example_is_kept_by_the_first_route_that_rebuilds_it(tmp_path: Path):
    """code where the call rebuilds the arguments; a pickle where it does not; Hypothesis's
    choices where nothing pickles (st.data()); "none", said so, where there are none either."""
    module = sys.modules[__name__]
    choices = _Observation("@reproduce_failure('6.1.2', b'AAFB')")
    cases = {
        "call": ({"spec": Spec(1, 0.5, ())}, None),
        "arguments": ({"x": torch.ones(5000)}, choices),
        "choices": ({"f": lambda: 1}, choices),
        "none": ({"f": lambda: 1}, None),
    }
    for route, (arguments, observation) in cases.items():
        nodeid = f"props/test_x.py::test_{route}"
        kept = keep_arguments(tmp_path, nodeid, arguments, describe_call("p", arguments),
                              module, observation)
        assert kept.route == route
        assert kept_example(tmp_path, nodeid) == kept
        assert examples_file(tmp_path, nodeid).exists() == (route == "arguments")
        assert kept.choices == (("6.1.2", "AAFB") if observation else None)
    assert kept_example(tmp_path, "props/test_x.py::test_never_failed") is None


def test_a_pickle_of_an_earlier_failing_call_is_removed_when_the_call_is_code(tmp_path: Path):
    module = sys.modules[__name__]
    nodeid = "props/test_x.py::test_shrinks"
    keep_arguments(tmp_path, nodeid, {"x": torch.ones(5000)}, "p(x=...)", module)
    assert examples_file(tmp_path, nodeid).exists()
    small = {"x": 3}
    assert keep_arguments(tmp_path, nodeid, small, describe_call("p", small), module).route \
        == "call"
    assert not examples_file(tmp_path, nodeid).exists()


def test_some_arguments_of_a_call_that_is_not_all_code_are_read():
    """An st.data() property's printed call, as Hypothesis prints it (its draws after the
    call's closing line): its parameters evaluate, ``data(...)`` need not, the backend
    printed as an object is this run's, and a value that is not even Python syntax does
    not keep the others from being read."""
    call = ("prop(\n    refimpl_backend=<mod.Backend object at 0x7f00aa>,\n    op='t',\n"
            "    data=data(...),\n)\nDraw 1: WriteBetween(spec=GraphSpec(side=3), op='t')")
    module = sys.modules[__name__]
    backend = object()
    assert build_some_kwargs(call, module, {"refimpl_backend": backend},
                             ["op", "refimpl_backend"]) == {"op": "t",
                                                            "refimpl_backend": backend}
    with pytest.raises(KeyError):
        build_some_kwargs(call, module, {}, ["missing"])
    odd = "prop(\n    f=<Foo at 0x12>,\n    spec=Spec(n=1,\n        scale=0.5, ops=()),\n)"
    assert build_some_kwargs(odd, module, {}, ["spec"]) == {"spec": Spec(1, 0.5, ())}
