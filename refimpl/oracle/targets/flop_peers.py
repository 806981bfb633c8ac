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

The adapters, one class per target, follow the base class: fvcore, ptflops and ptflops-aten,
thop, calflops, DeepSpeed, torchprofile. Each names the function it calls (``counter``,
``module:attribute``). That function's package is an optional extra, so this module does not
import it: the adapter imports it when it is built (:meth:`PeerBackend.__init__`, run by
``load_backend``), and a missing package becomes ``MissingExtra`` naming the extra at load
time, before any example is drawn (see :mod:`refimpl.oracle.registry`).
"""

from __future__ import annotations

import contextlib
import importlib
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
    counter = ""  # "module:attribute": the peer's counting function
    flop_conventions = REFERENCE

    def __init__(self) -> None:
        """Import the peer's counting function; ImportError where its package is missing
        (``load_backend`` turns it into ``MissingExtra`` naming the extra)."""
        module_name, _, attribute = self.counter.partition(":")
        self.count_fn = getattr(importlib.import_module(module_name), attribute)

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
    """A set of family names (names from ``FAMILIES``; checked by :class:`FlopConventions`)."""
    return frozenset(names)



# --- the adapters -------------------------------------------------------------------------

#: fvcore's default handles that count elementwise work, not matrix products.
FVCORE_NON_MATMUL_HANDLES = ("aten::batch_norm", "aten::group_norm", "aten::layer_norm",
                             "aten::instance_norm", "aten::upsample_nearest2d",
                             "aten::upsample_bilinear2d", "aten::adaptive_avg_pool2d",
                             "aten::grid_sampler")


def _free(inputs, outputs) -> int:
    """An fvcore handle for an op counted as 0 (refimpl's convention for elementwise work)."""
    return 0


class FvcoreBackend(PeerBackend):
    """Target ``fvcore``: fvcore's ``FlopCountAnalysis`` (a JIT trace, counted per aten op).

    Unit: MACs (fvcore calls one multiply-accumulate a "flop"). It counts addmm, bmm,
    _convolution (transposed too), einsum, matmul, mm and linear; bias additions are not
    counted. Ops it has no handle for (``aten::scaled_dot_product_attention``, ``aten::lstm``,
    ``aten::gru``) it reports through ``unsupported_ops()`` and counts as 0: stated ignored.
    Its default handles for normalisation, upsampling and pooling are replaced here by a handle
    counting 0, so its count is of matrix products only. (fvcore's documented way,
    ``set_op_handle(name, None)``, does not work for an op with a default handle: the handle
    is looked up before the ignore list; docs/findings.md.)
    """

    name = "fvcore"
    package = "fvcore"
    counter = "fvcore.nn:FlopCountAnalysis"
    flop_conventions = FlopConventions(
        "MAC", counted=families("linear", "linear_fn", "conv", "conv_transpose", "mha", "matmul"),
        ignored=families("sdpa", "lstm", "gru"),
        notes="JIT trace; SDPA, LSTM and GRU reported as unsupported ops and counted 0; "
              "norm/pool/upsample handles set to 0 by the adapter")

    def count(self, model, inputs):
        analysis = self.count_fn(model, inputs)
        analysis.set_op_handle(**dict.fromkeys(FVCORE_NON_MATMUL_HANDLES, _free))
        analysis.unsupported_ops_warnings(False)
        analysis.uncalled_modules_warnings(False)
        return analysis.total()


_LINEAR_AND_CONV = ("linear", "linear_fn", "conv", "conv_transpose")


class PtflopsBackend(PeerBackend):
    """Target ``ptflops``: ``ptflops.get_model_complexity_info``, its default ``pytorch``
    backend.

    Unit: MACs. Bias additions are counted (one per output element of a Linear or conv
    layer). It hooks known modules (Linear, convs, transposed convs, RNNs,
    MultiheadAttention) and patches functionals (F.linear, torch.matmul, ..., and elementwise
    ones: F.relu, F.softmax, torch.add/mul); its RNN and attention hooks add their own gate,
    scaling and softmax arithmetic (estimated), and it has no rule for
    ``F.scaled_dot_product_attention`` (ignored). It also counts activations, normalisation
    and pooling (elementwise). It puts the model in eval mode (restored by ``model_flops``).
    """

    name = "ptflops"
    package = "ptflops"
    counter = "ptflops:get_model_complexity_info"
    backend = "pytorch"
    flop_conventions = FlopConventions(
        "MAC", counted=families(*_LINEAR_AND_CONV, "matmul"), bias=families(*_LINEAR_AND_CONV),
        estimated=families("mha", "lstm", "gru"), ignored=families("sdpa"), elementwise=True,
        notes="module hooks + patched functionals; bias counted; RNN/MHA hooks add gate, "
              "scaling and softmax work; no rule for SDPA; activations/norms/pools counted")

    def count(self, model, inputs):
        macs, _params = self.count_fn(
            _ArgsModule(model), (1,), input_constructor=lambda _res: {"args": inputs},
            as_strings=False, print_per_layer_stat=False, backend=self.backend)
        return macs


class PtflopsAtenBackend(PtflopsBackend):
    """Target ``ptflops-aten``: ptflops' ``aten`` backend (a dispatch mode).

    Unit: MACs, bias counted. It counts only aten.mm, matmul, addmm, bmm and convolution (its
    documented list): SDPA and the fused CPU LSTM are ignored; GRU and MultiheadAttention
    decompose into addmm whose bias it counts where torch's kernel fuses it (estimated).
    """

    name = "ptflops-aten"
    backend = "aten"
    flop_conventions = FlopConventions(
        "MAC", counted=families(*_LINEAR_AND_CONV, "matmul"), bias=families(*_LINEAR_AND_CONV),
        estimated=families("mha", "gru"), ignored=families("sdpa", "lstm"),
        notes="dispatch mode over aten.mm/matmul/addmm/bmm/convolution only; bias counted")


class ThopBackend(PeerBackend):
    """Target ``thop``: ``thop.profile`` (forward hooks on known leaf modules).

    Unit: MACs. Linear and conv layers are counted without their bias; transposed convs share
    the conv rule. RNN hooks add their own gate arithmetic (estimated). Modules it has no rule
    for (MultiheadAttention, any module that calls F.linear, F.scaled_dot_product_attention or
    torch.matmul itself: linear_fn, sdpa, matmul) count 0: stated, thop counts only the module
    types in its table. Activations, normalisation and pooling modules are counted
    (elementwise).
    """

    name = "thop"
    package = "thop"
    counter = "thop:profile"
    flop_conventions = FlopConventions(
        "MAC", counted=families("linear", "conv", "conv_transpose"),
        estimated=families("lstm", "gru"), ignored=families("sdpa", "mha", "matmul", "linear_fn"),
        elementwise=True,
        notes="leaf-module hooks; bias not counted; unknown modules and functionals count 0")

    def count(self, model, inputs):
        macs, _params = self.count_fn(model, inputs=inputs, verbose=False)
        return macs


#: DeepSpeed's flops profiler and calflops (derived from it) patch torch's functionals and
#: report MACs of matrix products without bias; RNN module hooks add gate arithmetic to
#: their FLOPs only.
PATCHED_FUNCTIONALS = FlopConventions(
    "MAC", counted=families("linear", "linear_fn", "conv", "conv_transpose", "sdpa", "mha",
                            "matmul"),
    estimated=families("lstm", "gru"),
    notes="patched functionals; the adapter reads its MACs; RNNs only in its FLOPs")


class CalflopsBackend(PeerBackend):
    """Target ``calflops``: ``calflops.calculate_flops`` (patched functionals,
    DeepSpeed-derived).

    calflops reports FLOPs and MACs; the adapter reads its MACs (x2), its count of matrix
    products without bias (its FLOPs add elementwise ops and conv bias). RNNs go to its FLOPs
    only, with gate arithmetic (estimated). It states support for CNNs, RNNs and transformers,
    so attention (SDPA, MultiheadAttention) and explicit matmuls are expected to be counted.
    """

    name = "calflops"
    package = "calflops"
    counter = "calflops:calculate_flops"
    flop_conventions = PATCHED_FUNCTIONALS

    def count(self, model, inputs):
        _flops, macs, _params = self.count_fn(
            model, args=list(inputs), print_results=False, print_detailed=False,
            output_as_string=False)
        return macs


class DeepspeedBackend(PeerBackend):
    """Target ``deepspeed``: DeepSpeed's flops profiler, ``get_model_profile``.

    It patches torch functionals (F.linear, convs, transposed convs, SDPA,
    torch.matmul/bmm/...) and reports FLOPs and MACs; the adapter reads its MACs (x2), its
    count of matrix products without bias (its FLOPs add elementwise ops and conv bias). RNN
    module hooks go to its FLOPs only, with gate arithmetic (estimated). Installed with
    ``DS_BUILD_OPS=0`` (no CUDA ops).
    """

    name = "deepspeed"
    package = "deepspeed"
    counter = "deepspeed.profiling.flops_profiler:get_model_profile"
    flop_conventions = PATCHED_FUNCTIONALS

    def count(self, model, inputs):
        _flops, macs, _params = self.count_fn(
            model, args=list(inputs), print_profile=False, detailed=False, as_string=False,
            warm_up=0)
        return macs


class TorchprofileBackend(PeerBackend):
    """Target ``torchprofile``: ``torchprofile.profile_macs`` (a JIT trace, counted per aten
    op).

    Unit: MACs. Handlers for addmm/addmv/bmm/baddbmm/linear/matmul, _convolution,
    scaled_dot_product_attention and lstm, without bias; it also counts elementwise mul, norms
    and pooling. It stays silent about ops it has no handler for (no list of unsupported ops),
    so every matrix-product family is taken as counted; MultiheadAttention's scaling multiply
    makes that family estimated.
    """

    name = "torchprofile"
    package = "torchprofile"
    counter = "torchprofile:profile_macs"
    flop_conventions = FlopConventions(
        "MAC", counted=families("linear", "linear_fn", "conv", "conv_transpose", "sdpa", "matmul",
                                "lstm", "gru"),
        estimated=families("mha"), elementwise=True,
        notes="JIT trace; bias not counted; elementwise mul, norms and pools counted; "
              "ops without a handler silently 0")

    def count(self, model, inputs):
        return self.count_fn(model, inputs)
