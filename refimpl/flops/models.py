"""The models ``refimpl flops MODEL`` counts, built with one input each.

MODEL is one of refimpl's own (``resnet18``, ``transformer``, ``mlp``), a torchvision model
(``torchvision:NAME``), a transformers model built from its config (``hf:NAME``), or the
user's own ``module:factory`` (loaded as ``refimpl fuzz --target`` loads a backend:
:func:`refimpl.user_files.import_attribute`, the current folder first), run on one random
tensor of ``--input-shape`` and ``--dtype``.

Every way the user's code can fail before the count (the module raises at import, the factory
needs an argument or raises, the forward takes other than one input, the input cannot be
allocated) is a :class:`ModelError` whose one-line message names the argument.
"""

from __future__ import annotations

import argparse
import inspect
import math

import torch

from refimpl.models import MODELS
from refimpl.user_files import import_attribute

#: one sample's shape (the batch dimension is added in front) for each of refimpl's models.
SAMPLE_SHAPES: dict[str, tuple[int, ...]] = {
    "resnet18": (3, 224, 224),
    "transformer": (128, 64),
    "mlp": (64,),
}
#: short names for transformers model types: hf:NAME -> (model type, class with a head).
HF_ALIASES = {"gpt2": ("gpt2", "GPT2LMHeadModel"), "bert": ("bert", "BertModel"),
              "llama": ("llama", "LlamaForCausalLM")}
#: --dtype names -> torch dtype attribute.
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32")
BUILTIN_KINDS = ("torchvision", "hf")
#: a tensor's storage is indexed in bytes by a signed 64-bit integer.
MAX_STORAGE_BYTES = 2**63 - 1


class ModelError(ValueError):
    """A MODEL that cannot be built or run; the message names the argument at fault."""


def one_line(exc: BaseException) -> str:
    """``RuntimeError: <first line of the message>``: torch's messages run to many lines."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0].strip()}" if lines else type(exc).__name__


def is_factory(model: str) -> bool:
    """Whether MODEL names the user's own factory, ``pkg.module:attribute``."""
    kind, sep, _ = model.partition(":")
    return bool(sep) and kind not in BUILTIN_KINDS


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1,3,224,224"`` -> (1, 3, 224, 224); every dimension an int >= 1."""
    dims = []
    for part in text.split(","):
        if not part.strip().isdigit() or int(part) < 1:
            raise ValueError(f"{part.strip()!r} is not an int >= 1 (expected e.g. 1,3,224,224)")
        dims.append(int(part))
    return tuple(dims)


def input_arguments(args: argparse.Namespace) -> str:
    """The arguments that chose the input, as the user typed them (for error messages)."""
    if is_factory(args.model):
        return f"--input-shape {args.input_shape} --dtype {args.dtype}"
    tokens = f" --seq-len {args.seq_len}" if args.model.startswith("hf:") else ""
    return f"MODEL={args.model} --batch-size {args.batch_size}{tokens}"


def _load(spec: str):
    """The object ``module:attribute`` names; whatever its import raises is a ModelError."""
    try:
        return import_attribute(spec)
    except (Exception, SystemExit) as exc:  # an import may run anything, sys.exit included
        raise ModelError(f"MODEL={spec}: cannot load it ({one_line(exc)})") from exc


def _required_parameters(fn) -> list[str] | None:
    """Names of ``fn``'s parameters without a default (None: no signature to read)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p.name for p in parameters if p.default is p.empty and p.kind not in variadic]


def _call_factory(spec: str, factory):
    """``factory()``: refused up front when it needs arguments, its exception named."""
    needed = _required_parameters(factory)
    if needed:
        raise ModelError(f"MODEL={spec}: the factory needs arguments ({', '.join(needed)}); "
                         "name a callable that takes none and returns an nn.Module")
    try:
        return factory()
    except Exception as exc:
        raise ModelError(f"MODEL={spec}: the factory raised {one_line(exc)}") from exc


def _check_one_input(spec: str, model: torch.nn.Module) -> None:
    """refimpl flops gives the forward one tensor: a forward needing more is refused."""
    needed = _required_parameters(model.forward)
    if needed is not None and len(needed) > 1:
        raise ModelError(f"MODEL={spec}: its forward takes {len(needed)} inputs "
                         f"({', '.join(needed)}); --input-shape gives it one tensor")


def _random_input(args: argparse.Namespace, dtype: torch.dtype) -> torch.Tensor:
    """One random tensor of --input-shape: normal floats, or 0/1 ints (e.g. token ids)."""
    shape = parse_shape(args.input_shape)
    numel = math.prod(shape)
    if numel * dtype.itemsize > MAX_STORAGE_BYTES:
        raise ModelError(f"--input-shape={args.input_shape}: {numel} elements of {args.dtype} "
                         "overflow a tensor's storage (2**63 bytes)")
    try:
        if dtype.is_floating_point:
            return torch.randn(shape, dtype=dtype)
        return torch.randint(0, 2, shape, dtype=dtype)
    except (RuntimeError, MemoryError) as exc:
        raise ModelError(f"--input-shape={args.input_shape}: cannot allocate "
                         f"{numel * dtype.itemsize} bytes of {args.dtype} "
                         f"({one_line(exc)})") from exc


def _factory_model(args: argparse.Namespace):
    """The user's ``module:factory()`` (or module) and one random input of --input-shape."""
    factory = _load(args.model)
    if not isinstance(factory, torch.nn.Module) and not callable(factory):
        raise ModelError(f"MODEL={args.model}: expected an nn.Module or a factory returning "
                         f"one, got {type(factory).__name__}")
    model = factory if isinstance(factory, torch.nn.Module) else _call_factory(args.model, factory)
    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"MODEL={args.model}: expected a factory returning an nn.Module, got "
                         f"{type(model).__name__}")
    _check_one_input(args.model, model)
    dtype = getattr(torch, args.dtype)
    x = _random_input(args, dtype)
    if dtype.is_floating_point:  # the parameters in the input's precision, as a user runs it
        model = model.to(dtype)
    return model, x


def torchvision_advice(torch_version: str) -> str:
    """How to install a torchvision that works with the installed torch, without replacing it.

    torchvision 0.N pairs with torch 2.(N-15). PyPI's torchvision wheels require PyPI's torch
    (a CUDA build on Linux): plain ``pip install torchvision`` replaces a CPU torch, and a
    torchvision of another release fails to load its operators (``torchvision::nms does not
    exist``). A CPU build (``+cpu``) gets the matching CPU wheel from PyTorch's own index,
    with ``--no-deps`` so torch is left alone."""
    release, _, local = torch_version.partition("+")
    major, minor = (int(p) for p in release.split(".")[:2])
    vision = f"0.{minor + 15}" if major == 2 else None
    if vision is None:
        return (f"no torchvision release is known to pair with torch {torch_version}; "
                "install the one its release notes name, with --no-deps to keep torch")
    if local == "cpu":
        return (f"torch {torch_version} is a CPU build; PyPI has no torchvision for it (PyPI's "
                f"wheels pull in a CUDA torch). Keep torch and install the CPU build of the "
                f"matching release: pip install --no-deps 'torchvision=={vision}.*' "
                "--index-url https://download.pytorch.org/whl/cpu")
    return (f"install the release matching torch {torch_version}, keeping torch: "
            f"pip install --no-deps 'torchvision=={vision}.*'")


def _torchvision_model(name: str, batch: int):
    try:
        import torchvision
    except ImportError as exc:
        raise ModelError(f"MODEL=torchvision:{name} needs torchvision, which is not installed "
                         f"({exc}): {torchvision_advice(torch.__version__)}") from exc
    except RuntimeError as exc:  # a torchvision built for another torch: its ops do not load
        raise ModelError(f"MODEL=torchvision:{name}: the installed torchvision does not work "
                         f"with torch {torch.__version__} ({one_line(exc)}): "
                         f"{torchvision_advice(torch.__version__)}") from exc
    known = torchvision.models.list_models(module=torchvision.models)
    if name not in known:
        raise ModelError(f"MODEL=torchvision:{name}: not a torchvision classification model; "
                         f"one of: {', '.join(known)}")
    return torchvision.models.get_model(name, weights=None), torch.randn(batch, 3, 224, 224)


class HFOutput:
    """transformers' models return a ModelOutput: the count differentiates its first tensor."""

    def __init__(self, model) -> None:
        self.model = model

    def __call__(self, ids):
        return self.model(input_ids=ids, return_dict=False)[0]


def _hf_model(name: str, batch: int, seq_len: int, layers: int | None):
    try:
        import transformers
    except ImportError as exc:
        raise ModelError(f"MODEL=hf:{name} needs transformers, which is not installed ({exc}): "
                         "pip install 'refimpl[transformers]'") from exc
    model_type, class_name = HF_ALIASES.get(name, (name, None))
    try:
        config = transformers.AutoConfig.for_model(model_type)
    except ValueError as exc:
        raise ModelError(f"MODEL=hf:{name}: not a transformers model type; short names: "
                         f"{', '.join(HF_ALIASES)} ({one_line(exc)})") from exc
    if layers is not None:
        for attribute in ("num_hidden_layers", "n_layer", "num_layers"):
            if hasattr(config, attribute):
                setattr(config, attribute, layers)
    model = (getattr(transformers, class_name)(config) if class_name
             else transformers.AutoModel.from_config(config))
    ids = torch.randint(0, config.vocab_size, (batch, seq_len))
    return model, ids


def build(args: argparse.Namespace):
    """(module, callable, input) for MODEL; raises ModelError naming what is wrong."""
    kind, sep, name = args.model.partition(":")
    if is_factory(args.model):
        model, x = _factory_model(args)
        return model, model, x
    if sep and kind == "torchvision":
        model, x = _torchvision_model(name, args.batch_size)
        return model, model, x
    if sep and kind == "hf":
        model, ids = _hf_model(name, args.batch_size, args.seq_len, args.layers)
        return model, HFOutput(model), ids
    known = [n for n in MODELS if n in SAMPLE_SHAPES]
    if args.model not in known:
        raise ModelError(f"MODEL={args.model!r} is not one of: {', '.join(known)}, "
                         "torchvision:NAME, hf:NAME, module:factory")
    model = MODELS[args.model]()
    return model, model, torch.randn(args.batch_size, *SAMPLE_SHAPES[args.model])
