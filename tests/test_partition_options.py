"""Issue 32, item 8: ``PartitionOptions`` takes a budget or a time limit of any real number
type (numpy's scalars, ``Fraction``, ``Decimal``) and stores it as a ``float``; it refuses
bools, strings, NaN, infinities and out-of-range values, and a flag or a count of the wrong
type, each with one line naming the option."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import torch

import refimpl
from refimpl.partition.api import explain_many
from refimpl.partition.options import PartitionOptions

REAL_HALVES = [np.float32(0.5), np.float64(0.5), np.float16(0.5), Fraction(1, 2),
               Decimal("0.5"), 0.5]


@pytest.mark.parametrize("budget", REAL_HALVES, ids=lambda b: type(b).__name__)
def test_a_budget_of_any_real_type_is_taken_as_a_float(budget):
    options = PartitionOptions(memory_budget=budget)
    assert options.memory_budget == 0.5 and type(options.memory_budget) is float


@pytest.mark.parametrize("budget", [0, 1, np.int64(1), np.int8(0)], ids=repr)
def test_an_integer_budget_at_either_end_is_taken(budget):
    assert PartitionOptions(memory_budget=budget).memory_budget == float(budget)


@pytest.mark.parametrize("budget", [
    True, False, np.bool_(True), "0.5", None, [0.5], 0.5j, float("nan"), np.float32("nan"),
    Decimal("NaN"), Decimal("sNaN"), math.inf, -math.inf, Decimal("Infinity"), 1.0000001,
    -0.1, np.float32(1.5), Fraction(3, 2), Decimal("-0.5")], ids=repr)
def test_a_budget_that_is_no_number_in_0_1_is_refused_naming_it(budget):
    with pytest.raises(ValueError, match=r"^memory_budget=.* must be a number in \[0, 1\]$"):
        PartitionOptions(memory_budget=budget)


def test_compile_and_explain_many_take_numpy_and_fraction_budgets():
    def fn(x):
        return x.cos().sum()

    x = torch.randn(4, 4, requires_grad=True)
    refimpl.compile(fn, memory_budget=np.float32(0.5))(x).backward()
    plans = explain_many(fn, x, memory_budgets=[Fraction(1, 2), Decimal("0.25")])
    assert [p.memory_budget for p in plans] == [0.5, 0.25]


@pytest.mark.parametrize("limit", [np.float32(2.5), Fraction(5, 2), Decimal("2.5"), 2.5],
                         ids=lambda v: type(v).__name__)
def test_a_time_limit_of_any_real_type_is_taken(limit):
    options = PartitionOptions(solver_time_limit=limit)
    assert options.solver_time_limit == 2.5 and type(options.solver_time_limit) is float


@pytest.mark.parametrize("limit", [True, "60", 0, -1, math.inf, float("nan"), None],
                         ids=repr)
def test_a_bad_time_limit_is_refused_naming_it(limit):
    with pytest.raises(ValueError,
                       match=r"^solver_time_limit=.* must be a positive finite number"):
        PartitionOptions(solver_time_limit=limit)


@pytest.mark.parametrize("repeats", [True, False, 2.0, "3", 0, -1, None, np.bool_(True)],
                         ids=repr)
def test_profile_repeats_must_be_an_int_as_cse_must_be_a_bool(repeats):
    with pytest.raises(ValueError, match=r"^profile_repeats=.* must be an int >= 1$"):
        PartitionOptions(profile_repeats=repeats)


def test_profile_repeats_takes_numpy_ints_as_int():
    options = PartitionOptions(profile_repeats=np.int32(3))
    assert options.profile_repeats == 3 and type(options.profile_repeats) is int


@pytest.mark.parametrize("flag", ["cse", "optimize_layout"])
@pytest.mark.parametrize("value", [1, 0, "yes", None, np.bool_(True)], ids=repr)
def test_flags_must_be_true_or_false(flag, value):
    with pytest.raises(ValueError, match=rf"^{flag}=.* must be True or False$"):
        PartitionOptions(**{flag: value})


@pytest.mark.parametrize("name", ["solver", "runtime_estimator"])
@pytest.mark.parametrize("value", [None, ["exact"], 1], ids=repr)
def test_choices_must_be_one_of_their_names(name, value):
    with pytest.raises(ValueError, match=rf"^{name}=.* is not one of "):
        PartitionOptions(**{name: value})
