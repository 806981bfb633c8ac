"""The accuracy rule itself (refimpl.same), on crafted cases where the answer is known.

Most cases use a float64 truth of zeros, so each RMSE is simply the constant error put in.
"""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import same as torch_same

from refimpl import same
from refimpl.expect.same import mismatch, multiplier

N = 2000  # >= 1000 elements: the plain multiplier (2 for float32) applies


def const(value: float, n: int = N, dtype=torch.float32, shape=None) -> torch.Tensor:
    return torch.full(shape or (n,), value, dtype=dtype)


def test_allclose_passes_without_fp64_reference():
    assert same(const(1.0), const(1.0 + 5e-5))


def test_not_allclose_fails_without_fp64_reference():
    assert not same(const(1.0), const(1.001))
    assert "no float64 reference" in mismatch(const(1.0), const(1.001))


def test_rmse_rule_boundary_at_twice_eager_error():
    truth = const(0.0, dtype=torch.float64)
    ref = const(1e-3)
    assert same(ref, const(2e-3), fp64_ref=truth)  # 2 x eager's error
    assert same(ref, const(2e-3 + 0.9e-5), fp64_ref=truth)  # + tol / 10 slack
    assert not same(ref, const(2e-3 + 1.2e-5), fp64_ref=truth)
    assert "RMSE" in mismatch(ref, const(2.2e-3), fp64_ref=truth)


def test_rmse_rule_does_not_care_about_sign_of_error():
    truth = const(0.0, dtype=torch.float64)
    assert same(const(1e-3), const(-1.9e-3), fp64_ref=truth)


@pytest.mark.parametrize(("res", "shape", "tol", "expected"), [
    (const(0.0), None, 1e-4, 2.0),
    (const(0.0, n=999), None, 1e-4, 3.0),  # small tensors are noisy
    (const(0.0, dtype=torch.float16), None, 1e-4, 3.0),
    (const(0.0, dtype=torch.bfloat16), None, 1e-4, 3.0),
    (const(0.0), None, 2e-2, 3.0),  # a benchmark that asked for a higher tolerance
    (const(0.0, shape=(4, 500, 1, 1)), None, 1e-4, 3.0),  # 1x1 outputs
    (const(0.0, shape=(4, 500, 1, 2)), None, 1e-4, 2.0),
])
def test_multiplier_cases(res, shape, tol, expected):
    assert multiplier(res, res.double(), tol) == expected


def test_small_tensor_gets_three_times_eager_error():
    truth = const(0.0, n=100, dtype=torch.float64)
    ref = const(1e-3, n=100)
    assert same(ref, const(2.9e-3, n=100), fp64_ref=truth)
    assert not same(ref, const(3.2e-3, n=100), fp64_ref=truth)


def test_nan_in_eager_only_passes_when_compiled_matches_truth():
    truth = const(1.0, dtype=torch.float64)
    ref = const(1.0)
    ref[0] = float("nan")
    assert same(ref, const(1.01), fp64_ref=truth)
    assert not same(ref, const(1.1), fp64_ref=truth)


def test_equal_nan():
    a = torch.tensor([1.0, float("nan")])
    assert not same(a, a.clone())
    assert same(a, a.clone(), equal_nan=True)


def test_cosine_similarity_mode():
    ref = torch.linspace(1, 2, N)
    assert same(ref, ref * 1.5, cos_similarity=True)  # same direction
    assert not same(ref, ref.flip(0) - 1.5, cos_similarity=True)


def test_dtype_and_shape_must_match():
    assert not same(const(1.0), const(1.0, dtype=torch.float64))
    assert "shape" in mismatch(torch.ones(3), torch.ones(1))


def test_bool_tensors_compare_exactly():
    a = torch.tensor([True, False])
    assert same(a, a.clone())
    assert not same(a, ~a)


def test_nested_structures():
    t = torch.ones(2)
    ref = {"a": [t, (t, 3)], "b": "x", "c": None, "d": 2.0}
    assert same(ref, {"a": [t, (t, 3)], "b": "x", "c": None, "d": 2.0})
    assert not same(ref, {"a": [t, (t, 4)], "b": "x", "c": None, "d": 2.0})
    assert not same(ref, {"a": [t], "b": "x", "c": None, "d": 2.0})
    assert "keys" in mismatch({"a": t}, {"b": t})
    assert "result['a'][1][0]" in mismatch(ref, {"a": [t, (t * 2, 3)], "b": "x", "c": None,
                                                 "d": 2.0})


def test_nested_fp64_reference_is_used_per_leaf():
    truth = const(0.0, dtype=torch.float64)
    ref, good, bad = const(1e-3), const(1.5e-3), const(3e-3)
    assert same([ref, ref], [good, good], fp64_ref=[truth, truth])
    assert not same([ref, ref], [good, bad], fp64_ref=[truth, truth])


def test_short_fp64_reference_is_an_error_not_a_skip():
    """torch zips the sequences and silently stops comparing (docs/findings.md)."""
    a, bad = torch.ones(3), torch.zeros(3)
    assert torch_same([a, a], [a, bad], fp64_ref=[a.double()])  # torch: skips the tail
    with pytest.raises(ValueError, match="fp64_ref"):
        same([a, a], [a, bad], fp64_ref=[a.double()])


@pytest.mark.parametrize("kwargs", [{"tol": -1.0}, {"tol": "1e-4"}])
def test_bad_tolerance_is_rejected(kwargs):
    with pytest.raises(ValueError, match="tol="):
        same(torch.ones(1), torch.ones(1), **kwargs)


def test_unsupported_type_is_rejected():
    with pytest.raises(TypeError, match="ref at result"):
        same(object(), object())


NOISE = (0.0, 1e-5, 1e-3, 1.9e-3, 2.5e-3, 1e-2)


def _case(scale: float):
    gen = torch.Generator().manual_seed(0)
    truth = torch.randn(N, dtype=torch.float64, generator=gen)
    ref = (truth + 1e-3 * torch.randn(N, dtype=torch.float64, generator=gen)).float()
    res = (truth + scale * torch.randn(N, dtype=torch.float64, generator=gen)).float()
    return ref, res, truth


def test_noise_cases_cover_both_outcomes():
    outcomes = {same(*_case(s)[:2], fp64_ref=_case(s)[2]) for s in NOISE}
    assert outcomes == {True, False}


@pytest.mark.parametrize("scale", NOISE)
def test_agrees_with_dynamo_on_noisy_results(scale):
    ref, res, truth = _case(scale)
    assert same(ref, res, fp64_ref=truth) == torch_same(ref, res, fp64_ref=truth,
                                                        log_error=lambda *a: None)


@pytest.mark.parametrize("flag", ["cos_similarity", "equal_nan"])
@pytest.mark.parametrize("value", ["yes", 1, None])
def test_flags_must_be_bools(flag, value):
    """Issue 14: ``same(..., cos_similarity="yes")`` was accepted (read as truthy)."""
    x = torch.ones(3)
    with pytest.raises(TypeError, match=f"{flag}={value!r}: expected True or False"):
        same(x, x, **{flag: value})
