"""dynamo's accuracy rule: is a compiled result "the same" as the eager reference?

The rule, for one floating-point tensor (``ref`` eager, ``res`` compiled, ``fp64_ref`` the same
computation in float64):

1. pass if ``allclose(ref, res, atol=tol, rtol=tol)``;
2. otherwise, if a float64 reference is given, measure both errors against it,
   ``ref_error = rmse(fp64_ref, ref)`` and ``res_error = rmse(fp64_ref, res)``, and pass if
   ``res_error <= multiplier * ref_error + tol / 10``: the compiled result may be at most
   ``multiplier`` times as far from the truth as eager itself is. ``multiplier`` is 2, or 3 for
   float16/bfloat16 results, for tensors under 1,000 elements, for 4-d tensors whose last two
   dims are 1 (1x1 outputs are noisy), and when ``tol >= 0.02``;
3. one corner case passes too: ``ref`` has a NaN but neither ``res`` nor ``fp64_ref`` has one,
   and ``res`` is within 0.04 of ``fp64_ref`` (the compiled result is better than eager);
4. with ``equal_nan``, two NaN errors pass;
5. otherwise fail.

``cos_similarity=True`` replaces 1-2 by: allclose, else cosine similarity >= 0.99. Dtypes must
match exactly; boolean tensors compare as uint8. Lists, tuples, ``torch.Size`` and dicts compare
element by element (the same length, the same keys); ints, strs, bools, None and devices by
``==``; Python floats as 0-d tensors.

refimpl differs from dynamo in one deliberate way: ``fp64_ref`` must have the structure of
``ref``. dynamo zips the three sequences, so a short ``fp64_ref`` silently skips comparing the
tail of ``res`` (docs/findings.md, "Layout"); refimpl raises ``ValueError`` instead.
"""

from __future__ import annotations

import math
from typing import Any

import torch

_EXACT = (str, int, bool, type(None), torch.device, torch.dtype)
_SEQUENCES = (list, tuple, torch.Size)
_NAN_RESCUE_TOL = 0.04


def same(ref: Any, res: Any, fp64_ref: Any = None, cos_similarity: bool = False,
         tol: float = 1e-4, equal_nan: bool = False) -> bool:
    """True when ``res`` matches ``ref`` under dynamo's accuracy rule (module docstring)."""
    return mismatch(ref, res, fp64_ref, cos_similarity, tol, equal_nan) is None


def mismatch(ref: Any, res: Any, fp64_ref: Any = None, cos_similarity: bool = False,
             tol: float = 1e-4, equal_nan: bool = False) -> str | None:
    """None when ``same`` holds, else the path of the first failing leaf and why."""
    if not (isinstance(tol, (int, float)) and not isinstance(tol, bool) and tol >= 0):
        raise ValueError(f"tol={tol!r}: expected a number >= 0")
    for name, flag in (("cos_similarity", cos_similarity), ("equal_nan", equal_nan)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name}={flag!r}: expected True or False")
    return _compare(ref, res, ref if fp64_ref is None else fp64_ref,
                    (bool(cos_similarity), float(tol), bool(equal_nan)), "result")


def _compare(ref: Any, res: Any, fp64: Any, opts: tuple, path: str) -> str | None:
    if isinstance(ref, _SEQUENCES):
        return _compare_sequence(ref, res, fp64, opts, path)
    if isinstance(ref, dict):
        return _compare_dict(ref, res, fp64, opts, path)
    if isinstance(ref, (torch.Tensor, float)):
        if not isinstance(res, (torch.Tensor, float)):
            return f"{path}: expected a tensor or float, got {type(res).__name__}"
        return _compare_tensor(_as_tensor(ref), _as_tensor(res), _as_tensor(fp64), opts, path)
    if isinstance(ref, _EXACT):
        return None if type(ref) is type(res) and ref == res else f"{path}: {ref!r} != {res!r}"
    raise TypeError(f"ref at {path} has type {type(ref).__name__}; same() compares tensors, "
                    "floats, ints, strs, bools, None, devices, dtypes, lists, tuples and dicts")


def _compare_sequence(ref, res, fp64, opts, path) -> str | None:
    if not isinstance(res, _SEQUENCES):
        return f"{path}: expected a sequence, got {type(res).__name__}"
    if not isinstance(fp64, _SEQUENCES) or len(fp64) != len(ref):
        raise ValueError(f"fp64_ref at {path} must be a sequence of length {len(ref)} like ref")
    if len(ref) != len(res):
        return f"{path}: length {len(res)} != {len(ref)}"
    for i, (a, b, c) in enumerate(zip(ref, res, fp64)):
        if (why := _compare(a, b, c, opts, f"{path}[{i}]")) is not None:
            return why
    return None


def _compare_dict(ref, res, fp64, opts, path) -> str | None:
    if not isinstance(res, dict):
        return f"{path}: expected a dict, got {type(res).__name__}"
    if not isinstance(fp64, dict) or set(fp64) != set(ref):
        raise ValueError(f"fp64_ref at {path} must be a dict with the keys of ref")
    if set(ref) != set(res):
        return f"{path}: keys {sorted(map(str, res))} != {sorted(map(str, ref))}"
    for key in sorted(ref, key=str):
        if (why := _compare(ref[key], res[key], fp64[key], opts, f"{path}[{key!r}]")) is not None:
            return why
    return None


def _as_tensor(x: Any) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.tensor(x)


def _compare_tensor(ref, res, fp64, opts, path) -> str | None:
    """One tensor leaf: dtype, then bool / cosine / allclose-then-RMSE (module docstring)."""
    cos_similarity, tol, equal_nan = opts
    if ref.shape != res.shape:
        return f"{path}: shape {tuple(res.shape)} != {tuple(ref.shape)}"
    if ref.dtype != res.dtype:
        return f"{path}: dtype {res.dtype} != {ref.dtype}"
    if ref.dtype == torch.bool:
        ref, res = ref.to(torch.uint8), res.to(torch.uint8)
    if cos_similarity:
        return _cosine(ref, res, tol, path)
    if torch.allclose(ref, res, atol=tol, rtol=tol, equal_nan=equal_nan):
        return None
    if fp64.dtype != torch.float64:
        return f"{path}: not allclose (tol={tol}) and no float64 reference to judge by"
    return _rmse_rule(ref, res, fp64, tol, equal_nan, path)


def _cosine(ref, res, tol, path) -> str | None:
    ref, res = ref.flatten().to(torch.float32), res.flatten().to(torch.float32)
    if torch.allclose(ref, res, atol=tol, rtol=tol, equal_nan=True):
        return None
    score = torch.nn.functional.cosine_similarity(ref, res, dim=0, eps=1e-6).item()
    return None if score >= 0.99 else f"{path}: cosine similarity {score:.5f} < 0.99"


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.sqrt(torch.mean(torch.square(a.double() - b.double()))).item()


def multiplier(res: torch.Tensor, fp64_ref: torch.Tensor, tol: float) -> float:
    """How many times eager's own error the compiled result may have (module docstring, 2)."""
    if fp64_ref.numel() < 1000 or tol >= 2e-2 or (
            res.ndim == 4 and res.shape[-1] == res.shape[-2] == 1):
        return 3.0
    return 3.0 if res.dtype in (torch.float16, torch.bfloat16) else 2.0


def _rmse_rule(ref, res, fp64, tol, equal_nan, path) -> str | None:
    """Steps 2-4 of the rule: RMSE to the float64 truth, relative to eager's own RMSE."""
    if fp64.shape != ref.shape:
        raise ValueError(f"fp64_ref at {path} has shape {tuple(fp64.shape)}, ref "
                         f"{tuple(ref.shape)}")
    if (ref.isnan().any() and not res.isnan().any() and not fp64.isnan().any()
            and torch.allclose(fp64.to(res.dtype), res, atol=_NAN_RESCUE_TOL,
                               rtol=_NAN_RESCUE_TOL, equal_nan=equal_nan)):
        return None
    ref_error, res_error = _rmse(fp64, ref), _rmse(fp64, res)
    scale = multiplier(res, fp64, tol)
    if res_error <= scale * ref_error + tol / 10.0:
        return None
    if equal_nan and math.isnan(ref_error) and math.isnan(res_error):
        return None
    return (f"{path}: RMSE to fp64 {res_error:.3g} > {scale:g} x eager's {ref_error:.3g} "
            f"+ {tol / 10:.3g} (shape {tuple(res.shape)}, {res.dtype})")
