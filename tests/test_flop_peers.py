"""The FLOP-peer adapters (refimpl/oracle/targets/flop_peers.py) on a few fixed examples, where
their package is installed (skipped, visibly, where it is not); their registry entries and
extras; the model strategy and the hand derivation the peer properties rely on.

Peer findings (docs/findings.md "FLOP peers") are pinned to the peer version they were found
on: a newer release is skipped, visibly, so a fix upstream shows up as a skip to review.
"""

from __future__ import annotations

import configparser
import importlib.metadata
import importlib.util
import pathlib
import sys
import types

import pytest
import torch
from hypothesis import given
from torch import nn

from refimpl.expect.flops import FAMILIES, derive
from refimpl.oracle import MissingExtra, load_backend
from refimpl.oracle.registry import BUILTIN_TARGETS
from refimpl.oracle.targets.flop_peers import REFERENCE, FlopConventions
from refimpl.strategies.flop_models import FLOP_MODEL_FAMILIES, SdpaBlock, flop_models
from tests.finding import find_example

PEERS = {"fvcore": "fvcore", "ptflops": "ptflops", "ptflops-aten": "ptflops", "thop": "thop",
         "calflops": "calflops", "deepspeed": "deepspeed", "torchprofile": "torchprofile"}
IMPORT_NAME = {"deepspeed": "deepspeed.profiling.flops_profiler"}


def peer(name: str):
    pytest.importorskip(IMPORT_NAME.get(PEERS[name], PEERS[name]))
    return load_backend(name)


def at_version(name: str, version: str) -> None:
    found = importlib.metadata.version(PEERS[name])
    if found != version:
        pytest.skip(f"finding pinned to {PEERS[name]} {version}; installed {found}: re-check")


def _linear():
    torch.manual_seed(0)
    return nn.Linear(16, 8), (torch.randn(3, 16),)


def _grouped_transposed():
    torch.manual_seed(0)
    return (nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2, output_padding=1, bias=False),
            (torch.randn(2, 4, 5, 5),))


# Linear(16, 8) on 3 rows: 2*3*16*8 = 768 FLOPs; ptflops adds its bias: 3*8 MACs = 48 FLOPs.
LINEAR = {"fvcore": 768, "ptflops": 816, "ptflops-aten": 816, "thop": 768, "calflops": 768,
          "deepspeed": 768, "torchprofile": 768}


@pytest.mark.parametrize("name", list(PEERS))
def test_linear_in_flops(name):
    model, inputs = _linear()
    assert peer(name).model_flops(model, inputs) == LINEAR[name]


@pytest.mark.parametrize("name", list(PEERS))
def test_grouped_conv_in_flops(name):
    torch.manual_seed(0)
    model, x = nn.Conv2d(4, 6, 3, groups=2, bias=False), torch.randn(2, 4, 8, 8)
    # 2 * B * out positions * Co * (Ci / g) * k = 2 * 2 * 36 * 6 * 2 * 9
    assert peer(name).model_flops(model, (x,)) == 15552


@pytest.mark.parametrize("name", ["fvcore", "ptflops", "ptflops-aten", "deepspeed"])
def test_grouped_transposed_conv_where_right(name):
    model, inputs = _grouped_transposed()
    # 2 * B * input positions * Ci * (Co / g) * k = 2 * 2 * 25 * 4 * 3 * 9
    assert peer(name).model_flops(model, inputs) == 10800


@pytest.mark.parametrize("name,version,observed", [
    ("thop", "0.1.1-2209072238", 62208),     # output positions x Ci/g x k
    ("calflops", "0.3.2", 3600),                 # Co divided by groups twice
    ("torchprofile", "0.1.0", 124416),           # output positions x Ci x k
])
def test_finding_grouped_transposed_conv_is_miscounted(name, version, observed):
    model, inputs = _grouped_transposed()
    backend = peer(name)
    at_version(name, version)
    assert backend.model_flops(model, inputs) == observed != 10800


@pytest.mark.parametrize("name,version", [("calflops", "0.3.2")])
def test_finding_sdpa_is_not_counted(name, version):
    torch.manual_seed(0)
    model, x = SdpaBlock(16, 2, 2, bias=False, causal=False), torch.randn(2, 5, 16)
    backend = peer(name)
    at_version(name, version)
    d = derive(model, (x,))
    assert backend.model_flops(model, (x,)) == d.total_forward() - d.forward["sdpa"]


@pytest.mark.parametrize("name,version", [("torchprofile", "0.1.0")])
def test_finding_gru_is_silently_zero(name, version):
    torch.manual_seed(0)
    model, x = nn.GRU(8, 16, batch_first=True), torch.randn(2, 5, 8)
    backend = peer(name)
    at_version(name, version)
    assert backend.model_flops(model, (x,)) == 0 < derive(model, (x,)).total_forward()


@pytest.mark.parametrize("name", list(PEERS))
def test_model_mode_is_restored(name):
    model, inputs = _linear()
    model.train()
    peer(name).model_flops(model, inputs)
    assert model.training


# --- registry, extras, conventions ---------------------------------------------------------

def _extras() -> dict[str, str]:
    cfg = configparser.ConfigParser()
    cfg.read(pathlib.Path(__file__).resolve().parents[1] / "setup.cfg")
    return dict(cfg["options.extras_require"])


@pytest.mark.parametrize("name", list(PEERS))
def test_each_peer_is_a_builtin_target_with_its_extra(name):
    entry = BUILTIN_TARGETS[name]
    extras = _extras()
    assert entry.extra in extras and PEERS[name] in extras[entry.extra]
    assert PEERS[name] in extras["peers"]


def _block(monkeypatch, package: str) -> None:
    """Make ``import package`` (and its submodules) raise ImportError for this test."""
    for loaded in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.setitem(sys.modules, loaded, None)
    monkeypatch.setitem(sys.modules, package, None)


@pytest.mark.parametrize("name", list(PEERS))
def test_missing_package_is_missing_extra_naming_it(monkeypatch, name):
    """Every peer's package blocked: the adapters' module still imports (it defers each
    peer's import to the adapter's construction), and loading the target fails at load time
    with MissingExtra naming the extra."""
    module = BUILTIN_TARGETS[name].factory.partition(":")[0]
    for package in set(PEERS.values()):
        _block(monkeypatch, package)
    monkeypatch.delitem(sys.modules, module, raising=False)
    importlib.import_module(module)
    with pytest.raises(MissingExtra, match=rf"refimpl\[{BUILTIN_TARGETS[name].extra}\]"):
        load_backend(name)


NOT_INSTALLED = [name for name in PEERS if importlib.util.find_spec(PEERS[name]) is None]


@pytest.mark.parametrize("name", NOT_INSTALLED or [
    pytest.param("thop", marks=pytest.mark.skip(reason="every peer package is installed here"))])
def test_peer_not_installed_fails_at_load_in_one_line(name):
    """A peer whose package is really absent from this environment (no monkeypatching):
    ``load_backend`` raises, before any count, one line naming the target, the missing
    module and the pip command of its extra."""
    with pytest.raises(MissingExtra) as info:
        load_backend(name)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"target {name!r} needs an optional package that is not installed")
    assert f"No module named '{PEERS[name]}'" in message
    assert message.endswith(f"pip install 'refimpl[{BUILTIN_TARGETS[name].extra}]'")


class _FakeAnalysis:
    """fvcore's FlopCountAnalysis, as far as the adapter uses it."""

    def __init__(self, model, inputs):
        self.handles = {}

    def set_op_handle(self, **handles):
        self.handles.update(handles)

    def unsupported_ops_warnings(self, enabled):
        pass

    def uncalled_modules_warnings(self, enabled):
        pass

    def total(self):
        return 100 + sum(handle(None, None) for handle in self.handles.values())


#: name -> (counter attribute, a stand-in returning 100 MACs the way the peer returns them)
FAKE_COUNTERS = {
    "fvcore": _FakeAnalysis,
    "ptflops": lambda model, res, **kw: (100, 7),
    "ptflops-aten": lambda model, res, **kw: (100, 7),
    "thop": lambda model, inputs, verbose: (100, 7),
    "calflops": lambda model, args, **kw: (999, 100, 7),
    "deepspeed": lambda model, args, **kw: (999, 100, 7),
    "torchprofile": lambda model, inputs: 100,
}


@pytest.mark.parametrize("name", list(PEERS))
def test_adapter_reads_its_counter_in_macs(monkeypatch, name):
    """Each adapter with its peer's counting function replaced by a stand-in (so it runs where
    the peer is not installed): the function is looked up by the adapter's ``counter`` when
    the target is loaded, called on the model, and its MACs (100) become 200 FLOPs."""
    module_name, _, attribute = peer_class(name).counter.partition(":")
    fake = types.ModuleType(module_name)
    setattr(fake, attribute, FAKE_COUNTERS[name])
    monkeypatch.setitem(sys.modules, module_name, fake)
    model, inputs = _linear()
    assert load_backend(name).model_flops(model, inputs) == 200


def peer_class(name: str) -> type:
    """The adapter class of target ``name`` (importing it needs no peer package)."""
    module_name, _, attribute = BUILTIN_TARGETS[name].factory.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def test_conventions_reject_unknown_families_and_units():
    with pytest.raises(ValueError, match="unit"):
        FlopConventions("GMAC", counted=frozenset())
    with pytest.raises(ValueError, match="unknown families"):
        FlopConventions("MAC", counted=frozenset({"einsum"}))


@pytest.mark.parametrize("name", ["refimpl", "torch"])
def test_builtin_model_flops(name):
    model, inputs = _linear()
    assert load_backend(name).model_flops(model, inputs) == 768
    assert not hasattr(load_backend(name), "flop_conventions") or \
        load_backend(name).flop_conventions == REFERENCE


# --- the strategy and the hand derivation --------------------------------------------------

@given(flop_models())
def test_flop_models_build_and_run(drawn):
    model, inputs = drawn.build(), drawn.inputs()
    with drawn.context():
        assert model(*inputs).numel() >= 1
        assert drawn.family in derive(model, inputs).ran()
    assert model.training != drawn.inference


@pytest.mark.parametrize("feature", [
    lambda m: m.family == "conv_transpose" and m.param("conv").groups > 1
    and max(m.param("conv").output_padding) > 0,
    lambda m: m.family == "sdpa" and m.param("kv_heads") < m.param("heads"),
    lambda m: m.family == "gru" and m.param("bidirectional") and m.param("layers") == 2,
    lambda m: m.family == "mha" and not m.param("need_weights") and m.param("bias"),
    lambda m: m.family == "mha" and m.inference and m.param("heads") % 2 == 0,
    lambda m: m.family == "linear_fn" and all(m.param("bias")),
])
def test_flop_models_cover(feature):
    assert feature(find_example(flop_models(), feature))


def test_flop_models_reject_unknown_family():
    with pytest.raises(ValueError, match="family='einsum'"):
        find_example(flop_models("einsum"), lambda m: True)


def test_derivation_by_hand_numbers():
    torch.manual_seed(0)
    assert set(FLOP_MODEL_FAMILIES) <= set(FAMILIES)
    lstm = derive(nn.LSTM(8, 16, batch_first=True), (torch.randn(2, 5, 8),))
    assert lstm.forward["lstm"] == 2 * 10 * 4 * 16 * (8 + 16)  # 2 T B G H (I + H)
    mha = nn.MultiheadAttention(16, 2, batch_first=True)
    x = torch.randn(2, 5, 16)
    d = derive(mha, (x, x, x))
    # projections: 4 products of [10, 16] x [16, 16]; attention: 2 B H S S (D + Dv)
    assert d.forward["mha"] == 4 * 2 * 10 * 16 * 16 + 2 * 2 * 2 * 5 * 5 * 16
    assert d.bias_adds["mha"] == 4 * 10 * 16


@pytest.mark.parametrize("need_weights", [True, False])
def test_derivation_backward_by_hand_numbers(need_weights):
    """The attention kernel recomputes the scores in its backward only on the fused path
    (need_weights=False); the explicit bmm path (need_weights=True) forms the 4 gradients
    alone. (The old family derivation added the recompute on both paths.)"""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 2, batch_first=True)
    x = torch.randn(2, 5, 16, requires_grad=True)
    d = derive(mha, (x, x, x, None, need_weights), backward=True)
    projections = 4 * 2 * (2 * 10 * 16 * 16)  # 4 products, each gradient of input and weight
    scores = 2 * 2 * 2 * 5 * 5 * 8  # q k^T (and p v): 2 B H S S D
    recompute = 0 if need_weights else scores
    assert d.total_backward() == projections + 2 * (2 * scores) + recompute
