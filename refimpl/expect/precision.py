"""The float32 arithmetic that a comparison with eager runs in: TF32 on CUDA, stated.

On CUDA, cuDNN convolutions may compute float32 in TF32 (a 10-bit mantissa on tensor
cores; torch's default for convolutions) and cuBLAS matmuls may too (off by default). A
layout pass that runs a conv channels-last reaches kernels that use TF32 where eager's
contiguous ones did not, so a comparison with eager could measure TF32 rather than the pass.

Rule: every run that a comparison rests on (the eager references, the float64 reference and
the run under test) runs inside ONE :meth:`Precision.applied` block, so all of them compute
with the same float32 arithmetic, stated by a frozen :class:`Precision`:

- ``Precision()`` (``--refimpl-precision float32``, the default): the reference is full
  float32, TF32 off for cuDNN convolutions and CUDA matmuls; values are judged against
  contiguous eager, as the seeds judge them.
- ``Precision(tf32=True)`` (``--refimpl-precision tf32``): as a user with TF32 runs it, TF32
  on for both in every run; the values a converted graph computes are judged against eager
  run channels-last (:func:`refimpl.expect.layout.run_channels_last`), with TF32 too.

Invariant: :meth:`Precision.applied` sets the two flags on entry and, on exit, restores every
TF32 setting torch has (the legacy booleans and, where torch has them, the ``fp32_precision``
strings) to exactly what it was, exception or not. On CPU the flags change no result (TF32 is
a CUDA tensor-core format), so either precision computes the same there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

__all__ = ["PRECISIONS", "Precision", "tf32_settings"]

#: The names ``--refimpl-precision`` accepts.
PRECISIONS = ("float32", "tf32")


@dataclass(frozen=True)
class Precision:
    """Whether TF32 is on (cuDNN convolutions and CUDA matmuls) in every compared run."""

    tf32: bool = False

    @classmethod
    def named(cls, name: str) -> Precision:
        """``"float32"`` (the reference: TF32 off) or ``"tf32"`` (TF32 on)."""
        if name not in PRECISIONS:
            raise ValueError(f"precision {name!r} is not one of {', '.join(PRECISIONS)}")
        return cls(tf32=name == "tf32")

    @property
    def name(self) -> str:
        return "tf32" if self.tf32 else "float32"

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """TF32 on or off for cuDNN convolutions and CUDA matmuls inside the block; every
        TF32 setting restored exactly afterwards."""
        saved = tf32_settings()
        try:
            torch.backends.cudnn.allow_tf32 = self.tf32
            torch.backends.cuda.matmul.allow_tf32 = self.tf32
            yield
        finally:
            for owner, attr, value in saved:
                setattr(owner, attr, value)


def tf32_settings() -> list[tuple[object, str, object]]:
    """(object, attribute, value) of each TF32 setting of this torch, in the order that
    restores them: the legacy booleans first, as setting one rewrites the ``fp32_precision``
    strings (torch >= 2.9) that follow."""
    backends = torch.backends
    candidates = [(backends.cudnn, "allow_tf32"), (backends.cuda.matmul, "allow_tf32"),
                  (getattr(backends.cudnn, "conv", None), "fp32_precision"),
                  (getattr(backends.cudnn, "rnn", None), "fp32_precision"),
                  (backends.cuda.matmul, "fp32_precision")]
    return [(owner, attr, getattr(owner, attr)) for owner, attr in candidates
            if owner is not None and hasattr(owner, attr)]
