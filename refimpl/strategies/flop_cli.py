"""Invocations of ``refimpl flops MODEL``, drawn for the CLI property.

A valid invocation names one of refimpl's models (``mlp``, ``transformer``, ``resnet18``) or
a factory of this module (``refimpl.strategies.flop_cli:NAME``, found as a user's own is),
with the options a user combines: ``--batch-size`` or ``--input-shape`` and ``--dtype``,
``--depth``, ``--backward`` and ``--input-grad``, ``--format``, ``--output``, and
``--device meta`` for a model too large to run (a Linear of 2**20 x 2**20 built on the meta
device: 2.2 TFLOPs, counted from shapes alone). :func:`boundary_widths` sizes meta models
whose FLOPs, MACs and parameters land at and around every power of 1000 the human-readable
figures change prefix at (``sized_on_meta_<WIDTH>``: a factory for any width).

``torchvision:NAME`` models are counted in a stand-in torchvision (:func:`environment`: a
module holding only torchvision's model registry, ``models.list_models`` and
``models.get_model``, over :data:`TORCHVISION_MODELS`), so the path runs whether or not the
real one is installed.

A refused invocation is one of :data:`REFUSALS`, or a missing or broken torchvision under a
drawn torch version (:func:`torchvision_refusal`): argv and the argument its one-line error
must name, each the way a user gets it wrong (an option out of range, an option the MODEL
does not take, a factory that cannot be loaded or called, a forward that cannot run, a
package missing or built for another torch). A refusal's ``environment`` is faked while it
runs (:func:`environment`): the torch version string, an import that fails, the stand-in
torchvision; only the ``sys.modules`` entry it names is restored after, never the whole table.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.util
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, replace
from unittest import mock

import torch
from hypothesis import strategies as st
from torch import nn

HERE = "refimpl.strategies.flop_cli"
#: one sample's shape for refimpl's models, as `refimpl flops --help` states them.
BUILTIN_SHAPES = {"mlp": (64,), "transformer": (128, 64), "resnet18": (3, 224, 224)}
#: features of a factory's input: the Linear stack takes [*, 16], the conv net [B, 3, H, W].
HUGE = 2**20


def linear_stack() -> nn.Module:
    """Linear(16, 32), ReLU, then a nested Sequential(Linear(32, 8))."""
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Sequential(nn.Linear(32, 8)))


def conv_net() -> nn.Module:
    """A 3x3 convolution, then a nested strided one without bias."""
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                         nn.Sequential(nn.Conv2d(4, 2, 3, stride=2, bias=False)))


def token_model() -> nn.Module:
    """An embedding of token ids 0/1 (an integer input), then a Linear."""
    return nn.Sequential(nn.Embedding(2, 16), nn.Linear(16, 8))


def huge_on_meta() -> nn.Module:
    """One Linear(2**20, 2**20) without bias, built on the meta device (no memory)."""
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(HUGE, HUGE, bias=False))


SIZED = "sized_on_meta_"


def sized_on_meta(width: int) -> nn.Module:
    """Sequential(Linear(1, width)) without bias on the meta device: on a ``[1, 1]`` input it
    runs ``width`` MACs (``2 width`` FLOPs) and it holds ``width`` parameters."""
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(1, width, bias=False))


def __getattr__(name: str):
    """``sized_on_meta_<WIDTH>``: a factory (no arguments, as MODEL needs) of
    :func:`sized_on_meta` of that width."""
    width = name.removeprefix(SIZED)
    if width != name and width.isdigit():
        return functools.partial(sized_on_meta, int(width))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: a module given as the MODEL itself (not a factory): it is counted as it is.
LINEAR_MODULE = nn.Linear(16, 4)


def needs_argument(width):
    """A factory that needs an argument: refused."""
    return nn.Linear(width, width)


def raises():
    raise ValueError("the factory broke")


def not_a_module():
    return 3


NOT_CALLABLE = 3


class TwoInputs(nn.Module):
    def forward(self, a, b):
        return a + b


class ForwardRaises(nn.Module):
    def forward(self, x):
        raise KeyError("the forward broke")


class _BackwardBreaks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("the backward broke")


class BackwardRaises(nn.Module):
    """A linear layer whose backward raises: refused with --backward, naming the error."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return _BackwardBreaks.apply(self.linear(x))


class BuiltinForward(nn.Module):
    """A forward with no signature to read (a builtin): run, never refused for its inputs."""

    forward = torch.tanh


class NumberForward(nn.Module):
    """A forward that is not callable (no signature to read): refused when it runs."""

    forward = 5


class Spectral(nn.Module):
    """A Linear(4, 4), then two FFTs and one QR of its output: ops without a FLOP formula,
    which the report lists by name with their calls (:data:`UNCOUNTED`)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        spectra = torch.fft.rfft(y).abs().sum() + torch.fft.rfft(2 * y).abs().sum()
        return y + spectra + torch.linalg.qr(y)[0].sum()


#: the ops a factory runs without a FLOP formula (not declared free), by hand: {op: calls};
#: called twice, ``_fft_r2c`` sorts before ``linalg_qr`` by name but after it by calls.
UNCOUNTED = {"Spectral": {"aten._fft_r2c": 2, "aten.linalg_qr": 1}}


class ReturnsPair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x), x


def has(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def tiny_conv() -> nn.Module:
    """A strided 5x5 convolution (224 -> 28 pixels), then a nested Linear over the flattened
    map: a classification model of the stand-in torchvision."""
    return nn.Sequential(nn.Conv2d(3, 2, 5, stride=8), nn.ReLU(), nn.Flatten(),
                         nn.Sequential(nn.Linear(2 * 28 * 28, 4)))


def tiny_patches() -> nn.Module:
    """A 16x16 patch embedding without bias (224 -> 14 patches a side), then a Linear over
    each row of patches: a classification model of the stand-in torchvision."""
    return nn.Sequential(nn.Conv2d(3, 4, 16, stride=16, bias=False), nn.Linear(14, 3))


#: the stand-in torchvision's models, by name: each takes [B, 3, 224, 224] as torchvision's do.
TORCHVISION_MODELS = {"tiny_conv": tiny_conv, "tiny_patches": tiny_patches}


def _stand_in_torchvision() -> types.ModuleType:
    """A ``torchvision`` whose ``models`` has the registry calls refimpl makes:
    ``list_models(module=)`` (sorted names) and ``get_model(name, weights=None)``."""
    def get_model(name: str, weights=None) -> nn.Module:
        if weights is not None:
            raise ValueError(f"the stand-in torchvision has no weights, got {weights!r}")
        return TORCHVISION_MODELS[name]()

    models = types.ModuleType("torchvision.models")
    models.list_models = lambda module=None, **_: sorted(TORCHVISION_MODELS)
    models.get_model = get_model
    vision = types.ModuleType("torchvision")
    vision.models = models
    return vision


@contextlib.contextmanager
def _module_entry(name: str, module: types.ModuleType | None) -> Iterator[None]:
    """``sys.modules[name]`` is ``module`` inside (absent for None); that entry alone is
    restored after."""
    absent = object()
    before = sys.modules.pop(name, absent)
    if module is not None:
        sys.modules[name] = module
    try:
        yield
    finally:
        sys.modules.pop(name, None)
        if before is not absent:
            sys.modules[name] = before


class _FailingImport(importlib.abc.MetaPathFinder):
    """A finder, first on ``sys.meta_path``, whose search for ``name`` raises ``error``."""

    def __init__(self, name: str, error: type[Exception], message: str) -> None:
        self.name, self.error, self.message = name, error, message

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name:
            raise self.error(self.message)
        return None


#: what ``import NAME`` raises for a package missing, or built for another torch (its
#: operators do not load).
IMPORT_FAILURES = {
    "missing": (ModuleNotFoundError, "No module named '{name}'"),
    "broken": (RuntimeError, "operator {name}::nms does not exist"),
}


@contextlib.contextmanager
def _import_fails(how: str, name: str) -> Iterator[None]:
    error, message = IMPORT_FAILURES[how]
    finder = _FailingImport(name, error, message.format(name=name))
    with _module_entry(name, None):
        sys.meta_path.insert(0, finder)
        try:
            yield
        finally:
            sys.meta_path.remove(finder)


def _fake(kind: str, value: str):
    """One faked part of the environment: ("torch", VERSION) sets ``torch.__version__``;
    ("missing" or "broken", PACKAGE) makes its import fail; ("installed", "torchvision")
    puts the stand-in torchvision in place."""
    if kind == "torch":
        return mock.patch.object(torch, "__version__", value)
    if kind == "installed":
        return _module_entry(value, _stand_in_torchvision())
    return _import_fails(kind, value)


@contextlib.contextmanager
def environment(parts: tuple[tuple[str, str], ...]) -> Iterator[None]:
    """Every part of ``parts`` faked (:func:`_fake`) inside the block."""
    with contextlib.ExitStack() as stack:
        for kind, value in parts:
            stack.enter_context(_fake(kind, value))
        yield


@dataclass(frozen=True)
class Invocation:
    """A valid ``refimpl flops`` command line and what it runs."""

    model: str  # the MODEL argument
    factory: str | None  # the factory's name in this module, or None for refimpl's models
    batch: int
    sample: tuple[int, ...]  # the input's shape past the batch
    dtype: str
    device: str
    depth: int
    backward: bool
    input_grad: bool
    fmt: str
    to_file: bool
    #: options left out of the command line, each at its documented default
    #: (:data:`DOCUMENTED_DEFAULTS`), so the run must behave as if it were given
    omitted: tuple[str, ...] = ()

    def argv(self, output: str | None) -> list[str]:
        given = [("--depth", str(self.depth)), ("--format", self.fmt)]
        if self.factory:
            given += [("--input-shape", ",".join(map(str, (self.batch, *self.sample)))),
                      ("--dtype", self.dtype)]
        else:
            given += [("--batch-size", str(self.batch))]
        argv = [self.model] + [part for option, value in given if option not in self.omitted
                               for part in (option, value)]
        if self.device != "cpu":
            argv += ["--device", self.device]
        argv += ["--backward"] * self.backward + ["--input-grad"] * self.input_grad
        return argv + (["--output", output] if output else [])

    @property
    def kind(self) -> str:
        """The report's ``model.kind``: factory, torchvision or builtin."""
        if self.factory:
            return "factory"
        return "torchvision" if self.model.startswith(TORCHVISION) else "builtin"

    @property
    def uncounted(self) -> dict[str, int]:
        """The ops it runs without a FLOP formula: {op: calls} (:data:`UNCOUNTED`)."""
        return UNCOUNTED.get(self.factory or "", {})

    @property
    def environment(self) -> tuple[tuple[str, str], ...]:
        """What :func:`environment` fakes for the run: the stand-in torchvision, if used."""
        return (("installed", "torchvision"),) if self.kind == "torchvision" else ()

    def build(self) -> tuple[nn.Module, torch.Tensor]:
        """The model and an input of the invocation's shape and dtype, built apart."""
        from refimpl.models import MODELS

        factory = getattr(sys.modules[__name__], self.factory) if self.factory else None
        if self.kind == "torchvision":
            factory = TORCHVISION_MODELS[self.model.removeprefix(TORCHVISION)]
        model = factory() if factory else MODELS[self.model]()
        dtype = getattr(torch, self.dtype)
        shape = (self.batch, *self.sample)
        x = (torch.randn(shape, dtype=dtype) if dtype.is_floating_point
             else torch.randint(0, 2, shape, dtype=dtype))
        if dtype.is_floating_point:
            model = model.to(dtype)
        return model.to(self.device), x.to(self.device)


FACTORIES = ("linear_stack", "conv_net", "token_model", "huge_on_meta")
TORCHVISION = "torchvision:"


@st.composite
def invocations(draw: st.DrawFn) -> Invocation:
    """A valid invocation: the model, its input, depth, passes, format and destination."""
    vision = tuple(TORCHVISION + name for name in TORCHVISION_MODELS)
    source = draw(st.sampled_from(("mlp", "transformer", *vision, *FACTORIES)))
    factory = source if source in FACTORIES else None
    batch = draw(st.integers(1, 3))
    dtype, device = "float32", "cpu"
    if source == "linear_stack":
        sample = draw(st.sampled_from([(16,), (2, 16)]))
        dtype = draw(st.sampled_from(["float32", "float64", "bfloat16"]))
    elif source == "conv_net":
        sample = (3, draw(st.integers(3, 6)), draw(st.integers(3, 6)))
    elif source == "token_model":
        sample, dtype = (draw(st.integers(1, 4)),), draw(st.sampled_from(["int64", "int32"]))
    elif source == "huge_on_meta":
        sample, batch, device = (HUGE,), 1, "meta"
    elif source in vision:
        sample = (3, 224, 224)
    else:
        sample = BUILTIN_SHAPES[source]
        batch = 1 if source == "transformer" else batch
    backward = draw(st.booleans()) and device == "cpu"
    input_grad = backward and dtype.startswith(("float", "bfloat")) and draw(st.booleans())
    depth, fmt = draw(st.integers(1, 4)), draw(st.sampled_from(["table", "json", "csv"]))
    call = Invocation(f"{HERE}:{factory}" if factory else source, factory, batch, sample, dtype,
                      device, depth, backward, input_grad, fmt, draw(st.booleans()))
    return replace(call, omitted=draw(_omitted(call)))


#: the documented default of each option an invocation may leave out (``refimpl flops
#: --help``: depth 2, the table format, batch size 1, a float32 input)
DOCUMENTED_DEFAULTS = {"--depth": 2, "--format": "table", "--batch-size": 1,
                       "--dtype": "float32"}


def _omitted(call: Invocation) -> st.SearchStrategy[tuple[str, ...]]:
    """A subset of the options whose drawn value is their documented default, each left out
    with probability 1/2 (``--batch-size`` for refimpl's models, ``--dtype`` for factories)."""
    values = {"--depth": call.depth, "--format": call.fmt,
              "--batch-size": None if call.factory else call.batch,
              "--dtype": call.dtype if call.factory else None}
    at_default = [o for o, v in values.items() if v == DOCUMENTED_DEFAULTS[o]]
    return st.tuples(*[st.booleans() for _ in at_default]).map(
        lambda leave: tuple(o for o, out in zip(at_default, leave) if out))


#: the powers of 1000 where a human-readable figure changes prefix (K, M, G, T), and 1000 T
#: (past the largest prefix).
POWERS = tuple(1000**k for k in range(1, 6))


def rounding_edge(power: int) -> int:
    """The least count that three significant digits round up to ``power``: 999.5 of the
    prefix below (999,500 for M); 1000 itself, which no rounding reaches, for K."""
    return power - power // 2000


@st.composite
def boundary_widths(draw: st.DrawFn) -> tuple[int, ...]:
    """A width of :func:`sized_on_meta` for each of :data:`POWERS`: the power itself or its
    rounding edge, moved by -2..2; halved half the time, so that the FLOPs (2 width) rather
    than the MACs and parameters (width) land there."""
    at_edge, offset, halve = draw(st.booleans()), draw(st.integers(-2, 2)), draw(st.booleans())
    counts = [(rounding_edge(power) if at_edge else power) + offset for power in POWERS]
    return tuple(count // 2 if halve else count for count in counts)


def sized_invocation(width: int, fmt: str) -> Invocation:
    """``refimpl flops`` of :func:`sized_on_meta` (``width``) on a ``[1, 1]`` meta input."""
    return Invocation(f"{HERE}:{SIZED}{width}", f"{SIZED}{width}", 1, (1,), "float32", "meta",
                      2, False, False, fmt, False)


#: runs made every time (explicit examples): resnet18 (slow: never drawn), the 2.2-TFLOP
#: Linear on the meta device as a table, a training step of the token model as CSV to a
#: file, the bfloat16 Linear stack's backward with the input's gradient as JSON, and a
#: model running ops without a formula (:class:`Spectral`) as a table and as CSV.
EXPLICIT = (
    Invocation("resnet18", None, 1, BUILTIN_SHAPES["resnet18"], "float32", "cpu", 2, False,
               False, "json", False),
    Invocation(f"{HERE}:huge_on_meta", "huge_on_meta", 1, (HUGE,), "float32", "meta", 3,
               False, False, "table", False),
    Invocation(f"{HERE}:token_model", "token_model", 2, (3,), "int64", "cpu", 3, True, False,
               "csv", True),
    Invocation(f"{HERE}:linear_stack", "linear_stack", 3, (2, 16), "bfloat16", "cpu", 4, True,
               True, "json", True),
    Invocation(f"{HERE}:Spectral", "Spectral", 2, (4,), "float32", "cpu", 2, False, False,
               "table", False, omitted=("--depth", "--format", "--dtype")),
    Invocation("mlp", None, 1, BUILTIN_SHAPES["mlp"], "float32", "cpu", 2, True, False,
               "table", False, omitted=("--depth", "--format", "--batch-size")),
    Invocation(f"{HERE}:Spectral", "Spectral", 3, (4,), "float32", "cpu", 1, False, False,
               "csv", True),
)


@dataclass(frozen=True)
class Refusal:
    """A command line ``refimpl flops`` must refuse: exit 2, one line on stderr that starts by
    naming ``names``, says ``says`` and ends with ``ends``. ``stage``: "arguments" (refused
    before anything is built) or "model" (refused while building or running MODEL).
    ``environment``: the parts faked while it runs (:func:`environment`). ``advice_for``: a
    torch version whose torchvision advice the line must give (the property derives it:
    :func:`refimpl.expect.flops_cli.torchvision_advice`)."""

    argv: tuple[str, ...]
    names: str
    says: str
    stage: str
    environment: tuple[tuple[str, str], ...] = ()
    ends: str = ""
    advice_for: str = ""


def _torch_minor() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def _torchvision_refusal() -> Refusal:
    """Without torchvision: the advice names the release that pairs with this torch
    (torchvision 0.N with torch 2.(N - 15)), from PyTorch's CPU index for a CPU build of
    torch; with it, an unknown name is refused."""
    if has("torchvision"):
        return Refusal(("torchvision:no_such_net",), "MODEL=torchvision:no_such_net",
                       "not a torchvision classification model", "model")
    major, minor = _torch_minor()
    pinned = f"torchvision==0.{minor + 15}.*" if major == 2 else "--no-deps"
    if torch.__version__.endswith("+cpu"):  # PyPI has no CPU torchvision: PyTorch's index
        pinned = f"{pinned}' --index-url https://download.pytorch.org/whl/cpu"
    return Refusal(("torchvision:resnet18",), "MODEL=torchvision:resnet18", pinned, "model")


def torchvision_refusal(version: str, how: str) -> Refusal:
    """``refimpl flops torchvision:resnet18`` under torch ``version`` with torchvision
    ``how`` ("missing" or "broken"): the error names the model and what failed, and gives the
    advice for that torch (``advice_for``: the pip command of the pairing rule, or that no
    torchvision pairs with it)."""
    error, message = IMPORT_FAILURES[how]
    failure = message.format(name="torchvision")
    names = {"missing": "MODEL=torchvision:resnet18 needs torchvision, which is not installed "
                        f"({failure})",
             "broken": "MODEL=torchvision:resnet18: the installed torchvision does not work "
                       f"with torch {version} ({error.__name__}: {failure})"}[how]
    return Refusal(("torchvision:resnet18",), names, "", "model",
                   (("torch", version), (how, "torchvision")), advice_for=version)


@st.composite
def torch_versions(draw: st.DrawFn) -> str:
    """A torch version string: release 1.x to 3.x, and a local build (none, CPU, CUDA, ROCm)."""
    release = ".".join(str(draw(st.integers(low, high))) for low, high in ((1, 3), (0, 20), (0, 3)))
    local = draw(st.sampled_from(["", "+cpu", "+cu126", "+rocm6.3"]))
    return release + local


def _hf_refusal() -> Refusal:
    says = "not a transformers model type" if has("transformers") else "needs transformers"
    return Refusal(("hf:no_such_type",), "MODEL=hf:no_such_type", says, "model")


def _factory(name: str, *more: str) -> tuple[str, ...]:
    return (f"{HERE}:{name}", "--input-shape", "2,4", *more)


#: 2**61 float32 elements: 2**63 bytes, one more than a tensor's storage can index.
OVERFLOW = 2**61
#: 2**60 float32 elements: 2**62 bytes, indexable, but no machine allocates them.
UNALLOCATABLE = 2**60

REFUSALS = (
    Refusal(("mlp", "--depth", "0"), "--depth=0", "int >= 1", "arguments"),
    Refusal(("mlp", "--batch-size", "-1"), "--batch-size=-1", "int >= 1", "arguments"),
    Refusal(("mlp", "--format", "xml"), "--format='xml'", "table", "arguments"),
    Refusal(_factory("linear_stack", "--dtype", "float8"), "--dtype='float8'", "float32",
            "arguments"),
    Refusal(("mlp", "--dtype", "float64"), "--dtype: only for module:factory", "MODEL=mlp",
            "arguments"),
    Refusal(("mlp", "--seq-len", "4"), "--seq-len: only for hf:", "MODEL=mlp", "arguments"),
    Refusal(_factory("linear_stack", "--batch-size", "2"), "--batch-size: only for",
            "--input-shape", "arguments"),
    Refusal(("mlp", "--input-grad"), "--input-grad", "add --backward", "arguments"),
    Refusal(("mlp", "--input-shape", "1,64"), "--input-shape: only for module:factory",
            "--batch-size", "arguments"),
    Refusal((f"{HERE}:linear_stack",), "--input-shape: required", "MODEL=", "arguments"),
    Refusal((f"{HERE}:linear_stack", "--input-shape", "2,x"), "--input-shape='2,x'", "'x' is not",
            "arguments"),
    Refusal(("mlp", "--device", "bogus"), "--device='bogus'", "Expected one of", "arguments"),
    Refusal(("mlp", "--output", "/no/such/folder/flops.txt"), "--output=/no/such/folder",
            "does not exist", "arguments"),
    Refusal(("no_such_model",), "MODEL='no_such_model'", "mlp", "model"),
    # a kind without its colon is a name like any other, not a torchvision or hf model
    Refusal(("hf",), "MODEL='hf'", "is not one of", "model"),
    Refusal(("torchvision",), "MODEL='torchvision'", "is not one of", "model"),
    Refusal(("refimpl.strategies.no_such_module:f", "--input-shape", "2,4"),
            "MODEL=refimpl.strategies.no_such_module:f", "cannot load it", "model"),
    Refusal(_factory("needs_argument"), f"MODEL={HERE}:needs_argument",
            "needs arguments (width)", "model"),
    Refusal(_factory("raises"), f"MODEL={HERE}:raises", "raised ValueError: the factory broke",
            "model"),
    Refusal(_factory("not_a_module"), f"MODEL={HERE}:not_a_module", "got int", "model"),
    Refusal(_factory("NOT_CALLABLE"), f"MODEL={HERE}:NOT_CALLABLE", "got int", "model"),
    Refusal(_factory("TwoInputs"), f"MODEL={HERE}:TwoInputs", "takes 2 inputs (a, b)",
            "model"),
    Refusal(_factory("ForwardRaises"), "--input-shape 2,4 --dtype float32",
            "raised KeyError: 'the forward broke'", "model"),
    Refusal(_factory("ReturnsPair", "--backward"), "--backward", "returned tuple", "model"),
    Refusal(_factory("BackwardRaises", "--backward"), "--backward: the backward of MODEL=",
            "raised RuntimeError: the backward broke", "model"),
    Refusal(_factory("NumberForward"), "--input-shape 2,4 --dtype float32",
            "raised TypeError: 'int' object is not callable", "model"),
    # its forward's signature cannot be read: it runs, and only --backward is refused
    Refusal(_factory("BuiltinForward", "--backward"), "--backward",
            "no parameter that requires grad", "model"),
    Refusal(("torch.nn:ReLU", "--input-shape", "2,4", "--backward"), "--backward",
            "no parameter that requires grad", "model"),
    Refusal(_factory("token_model", "--dtype", "int64", "--backward", "--input-grad"),
            "--input-grad", "the input is int64", "model"),
    Refusal((f"{HERE}:linear_stack", "--input-shape", str(OVERFLOW)),
            f"--input-shape={OVERFLOW}", "overflow a tensor's storage (2**63 bytes)", "model"),
    Refusal((f"{HERE}:linear_stack", "--input-shape", str(UNALLOCATABLE)),
            f"--input-shape={UNALLOCATABLE}", f"cannot allocate {UNALLOCATABLE * 4} bytes",
            "model"),
    _torchvision_refusal(),
    _hf_refusal(),
    # torchvision missing or broken under each kind of torch build (more are drawn)
    torchvision_refusal("2.13.0+cpu", "missing"),
    torchvision_refusal("2.10.1", "missing"),
    torchvision_refusal("2.14.1+cu126", "broken"),
    torchvision_refusal("3.0.0", "missing"),
    torchvision_refusal("1.13.1+cpu", "broken"),
    # the stand-in torchvision: a name it does not hold is refused, its models listed
    Refusal(("torchvision:no_such_net",), "MODEL=torchvision:no_such_net: not a torchvision "
            "classification model", "one of", "model", (("installed", "torchvision"),),
            ends=f"one of: {', '.join(sorted(TORCHVISION_MODELS))}"),
    Refusal(("hf:bert",), "MODEL=hf:bert needs transformers, which is not installed "
            "(No module named 'transformers')", "pip install", "model",
            (("missing", "transformers"),), ends="pip install 'refimpl[transformers]'"),
)
if has("transformers"):  # GPT-2 holds 1024 positions: the forward fails on more tokens
    REFUSALS += (Refusal(("hf:gpt2", "--layers", "1", "--seq-len", "1025"),
                         "MODEL=hf:gpt2 --batch-size 1 --seq-len 1025: the forward of "
                         "MODEL=hf:gpt2 raised", "Error", "model"),)
if not torch.cuda.is_available():  # a CUDA device asked for where there is none
    REFUSALS += (Refusal(("mlp", "--device", "cuda"), "--device='cuda'", "sees no CUDA",
                         "arguments"),)


def refusals() -> st.SearchStrategy[Refusal]:
    """One of :data:`REFUSALS` or a missing or broken torchvision under a drawn torch version
    (:func:`torchvision_refusal`); a third of the draws among those refused while the model
    is built or run (the user's code under the counter), a third among all."""
    model_stage = [r for r in REFUSALS if r.stage == "model"]
    failures = st.sampled_from(sorted(IMPORT_FAILURES))
    drawn = st.builds(torchvision_refusal, torch_versions(), failures)
    return st.one_of(st.sampled_from(model_stage), st.sampled_from(REFUSALS), drawn)
