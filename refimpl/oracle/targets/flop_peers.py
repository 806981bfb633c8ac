"""FLOP counters found in the wild, as targets of the ``model_flops`` component.

Each peer (fvcore, ptflops with both of its backends, thop, calflops, DeepSpeed's flops
profiler, torchprofile) counts a whole model's forward, by module hooks, patched functionals,
a JIT trace or a dispatch mode, mostly in multiply-accumulates (MACs). An adapter:

1. runs the peer on ``model(*inputs)`` with its output silenced, and reads its count;
2. converts the unit: FLOPs = 2 x MACs (refimpl's and torch's convention);
3. states the peer's conventions as data (:class:`FlopConventions`): which layer families
   it counts as matrix products, whose bias additions it adds, which it counts with its own
   extra arithmetic (not comparable), which it states it ignores, and whether it counts
   elementwise, normalisation and pooling ops.

A property compares a peer only where its conventions cover the family under test; a
disagreement beyond the stated conventions is a finding. Families are the names of
:data:`refimpl.expect.flops.FAMILIES`.

Each peer's module (``peer_<name>.py`` beside this one) imports its package at the top, so a
missing package becomes ``MissingExtra`` naming the extra (see the registry).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import logging
import warnings
from dataclasses import dataclass
from typing import Any

from torch import nn

from refimpl.expect.flops import FAMILIES, Derivation

UNITS = {"MAC": 2, "FLOP": 1}  # FLOPs per unit


@dataclass(frozen=True)
class FlopConventions:
    """What a counter counts, per layer family (names from ``FAMILIES``).

    ``counted``: matrix products counted as refimpl counts them (``2 m k n`` FLOPs);
    ``bias``: families whose bias additions are added, one unit per output element;
    ``estimated``: families counted with the peer's own extra arithmetic (gates, softmax,
    scaling): not comparable exactly; ``ignored``: families the peer states it does not count;
    ``elementwise``: whether activations, normalisation, pooling and other elementwise ops
    add to its count (then a model with such layers only bounds it from below).
    """

    unit: str
    counted: frozenset[str]
    bias: frozenset[str] = frozenset()
    estimated: frozenset[str] = frozenset()
    ignored: frozenset[str] = frozenset()
    elementwise: bool = False
    notes: str = ""

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit={self.unit!r}: expected one of {sorted(UNITS)}")
        for group in (self.counted, self.bias, self.estimated, self.ignored):
            unknown = set(group) - set(FAMILIES)
            if unknown:
                raise ValueError(f"unknown families {sorted(unknown)}: expected {FAMILIES}")

    def covers(self, family: str) -> bool:
        """Whether a count of ``family`` alone can be compared exactly."""
        return family in self.counted

    def expected(self, d: Derivation) -> int:
        """The FLOPs this counter should report for a derived model, by its conventions
        (families it ignores contribute 0; estimated ones are not comparable: see
        :meth:`comparable`)."""
        per_bias = UNITS[self.unit]
        return sum(d.forward.get(f, 0) + (per_bias * d.bias_adds.get(f, 0)
                                          if f in self.bias else 0)
                   for f in self.counted)

    def comparable(self, d: Derivation) -> bool:
        """Whether every family the model ran is counted or stated ignored."""
        return all(f in self.counted or f in self.ignored for f in d.ran())


#: refimpl's and torch's convention: FLOPs of every matrix product, nothing else.
REFERENCE = FlopConventions("FLOP", counted=frozenset(FAMILIES),
                            notes="matrix products only; bias and elementwise free")


def conventions_of(backend: Any) -> FlopConventions:
    """A backend's stated conventions (``flop_conventions``), else refimpl's."""
    return getattr(backend, "flop_conventions", REFERENCE)


@contextlib.contextmanager
def quiet():
    """Silence a peer's prints, warnings and log lines."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


class _ArgsModule(nn.Module):
    """``model`` called with a fixed tuple of positional inputs passed as one keyword (for
    counters that build the call themselves from a dict of keyword arguments)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, args: tuple) -> Any:
        return self.model(*args)


class PeerBackend:
    """Base of the peer adapters: ``model_flops`` = the peer's count x FLOPs per unit."""

    name = "peer"
    package = ""  # the distribution whose version is reported
    flop_conventions = REFERENCE

    @property
    def version(self) -> str:
        return f"{self.package} {importlib.metadata.version(self.package)}"

    def count(self, model: nn.Module, inputs: tuple) -> float:
        """The peer's own count of ``model(*inputs)``, in its own unit."""
        raise NotImplementedError

    def model_flops(self, model: nn.Module, inputs: tuple) -> int:
        """Forward FLOPs of ``model(*inputs)`` as this peer counts them."""
        if not isinstance(inputs, tuple):
            raise TypeError(f"inputs: expected a tuple of model inputs, got "
                            f"{type(inputs).__name__}")
        modes = {m: m.training for m in model.modules()}  # peers may call model.eval()
        try:
            with quiet():
                raw = self.count(model, inputs)
        finally:
            for m, training in modes.items():
                m.training = training
        return round(float(raw) * UNITS[self.flop_conventions.unit])


def families(*names: str) -> frozenset[str]:
    return frozenset(names)


#: DeepSpeed's flops profiler and calflops (derived from it) patch torch's functionals and
#: report MACs of matrix products without bias; RNN module hooks add gate arithmetic to
#: their FLOPs only.
PATCHED_FUNCTIONALS = FlopConventions(
    "MAC", counted=families("linear", "linear_fn", "conv", "conv_transpose", "sdpa", "mha",
                            "matmul"),
    estimated=families("lstm", "gru"),
    notes="patched functionals; the adapter reads its MACs; RNNs only in its FLOPs")
