"""The device axis: the device types this machine offers, drawn like any other argument.

A property whose answer can change with the device (cuDNN's channels-last kernels, a
compiler that optimises layouts only on GPU) takes ``device=devices()``. Drawn, not
parametrized, so a failing example prints its device and its reproducer rebuilds it. Without
a GPU the axis is ``"cpu"`` alone (``sampled_from`` of one element is ``just``: it takes no
choice from the example, so it does not change what the other arguments shrink to); the
GPU's half of the axis is then not exercised, which the CUDA-only tests say visibly (they
skip with the reason).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

__all__ = ["available_devices", "devices"]


def available_devices() -> tuple[str, ...]:
    """``("cpu",)``, plus ``"cuda"`` where torch sees a CUDA device."""
    return ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)


def devices() -> st.SearchStrategy[str]:
    """One of :func:`available_devices`."""
    return st.sampled_from(available_devices())
