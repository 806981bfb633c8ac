"""``refimpl flops MODEL``: a model's FLOPs, MACs and parameters per module.

MODEL is one of refimpl's own (``resnet18``, ``transformer``, ``mlp``), a torchvision model
(``torchvision:resnet50``, random weights, a 3x224x224 image), a transformers model built
from its config class (``hf:gpt2``, ``hf:bert``, ``hf:llama``, or any ``hf:MODEL_TYPE``;
random weights, nothing downloaded; ``--seq-len`` tokens; ``--layers`` overrides the layer
count), or the user's own: ``pkg.module:factory``, a callable taking no arguments that
returns an ``nn.Module``, run on one random tensor of ``--input-shape`` (batch included),
``--dtype`` and ``--device``.

It runs one batch under refimpl's FlopCounterMode (the forward; ``--backward`` adds the
backward) and prints, per module up to ``--depth``: FLOPs, MACs (FLOPs / 2: refimpl counts
only matrix products, one multiply-accumulate each is 2 FLOPs) and parameters; the FLOPs per
op; then the ops it ran that do arithmetic but have no formula (never a silent 0). Totals are
exact integers with a human-readable value beside them (``1.82 GFLOPs``). ``--format json``
or ``csv`` exports the same with structured fields (``--output FILE`` writes it to a file).

Exit status: 0; 2 for bad arguments (an unknown model, a value out of range) or a model
whose package is not installed, with the allowed values or the package to install named.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import io
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from refimpl.models import MODELS
from refimpl.outputs import file_problem

HELP = "print a model's FLOPs, MACs and parameters per module and per op (forward by default)"

#: one sample's shape (the batch dimension is added in front) for each of refimpl's models.
SAMPLE_SHAPES: dict[str, tuple[int, ...]] = {
    "resnet18": (3, 224, 224),
    "transformer": (128, 64),
    "mlp": (64,),
}
#: short names for transformers model types: hf:NAME -> (model type, class with a head).
HF_ALIASES = {"gpt2": ("gpt2", "GPT2LMHeadModel"), "bert": ("bert", "BertModel"),
              "llama": ("llama", "LlamaForCausalLM")}
FORMATS = ("table", "json", "csv")
#: --dtype names -> torch dtype attribute.
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32")
BUILTIN_KINDS = ("torchvision", "hf")


class ModelError(ValueError):
    """A MODEL that cannot be built: unknown, or its package is not installed."""


@dataclass(frozen=True)
class ModuleRow:
    """One module's line: its name, depth, FLOPs, MACs (FLOPs / 2) and parameters."""

    module: str
    depth: int
    flops: int
    macs: int
    params: int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL",
                        help=f"one of: {', '.join(SAMPLE_SHAPES)}; torchvision:NAME; "
                             f"hf:NAME ({', '.join(HF_ALIASES)} or a transformers model type); "
                             "or pkg.module:factory (your own; needs --input-shape)")
    parser.add_argument("--input-shape", metavar="N,C,H,W", default=None,
                        help="pkg.module:factory models: the input's shape, batch included "
                             "(e.g. 1,3,224,224)")
    parser.add_argument("--dtype", default="float32",
                        help=f"pkg.module:factory models: the input's dtype, one of: "
                             f"{', '.join(DTYPES)} (default float32)")
    parser.add_argument("--device", default="cpu",
                        help="where the model and input live (default cpu; e.g. cuda)")
    parser.add_argument("--batch-size", type=int, default=1,
                        help="samples per batch (default 1; resnet18 input 1x3x224x224)")
    parser.add_argument("--depth", type=int, default=2,
                        help="deepest module level shown, the model itself is 1 (default 2)")
    parser.add_argument("--backward", action=argparse.BooleanOptionalAction, default=False,
                        help="count the backward too (default: forward only)")
    parser.add_argument("--format", default="table", help=f"one of: {', '.join(FORMATS)}")
    parser.add_argument("--output", metavar="FILE", help="write the output to FILE")
    parser.add_argument("--seq-len", type=int, default=64,
                        help="tokens per sample for hf: models (default 64)")
    parser.add_argument("--layers", type=int, default=None,
                        help="hf: models: number of layers (default: the config's)")


def _bad(message: str) -> int:
    print(f"refimpl flops: error: {message}", file=sys.stderr)
    return 2


def _check(args: argparse.Namespace) -> str | None:
    """The first bad argument's message, or None."""
    for name, value, low in (("--batch-size", args.batch_size, 1), ("--depth", args.depth, 1),
                             ("--seq-len", args.seq_len, 1)):
        if value < low:
            return f"{name}={value}: expected an int >= {low}"
    if args.layers is not None and args.layers < 1:
        return f"--layers={args.layers}: expected an int >= 1"
    if args.format not in FORMATS:
        return f"--format={args.format!r}: expected one of {', '.join(FORMATS)}"
    if args.dtype not in DTYPES:
        return f"--dtype={args.dtype!r}: expected one of {', '.join(DTYPES)}"
    problem = _shape_problem(args)
    if problem:
        return problem
    problem = args.output and file_problem(Path(args.output))
    return f"--output={args.output}: {problem}" if problem else None


def _shape_problem(args: argparse.Namespace) -> str | None:
    """--input-shape is required for a pkg.module:factory MODEL and refused for the others."""
    if not is_factory(args.model):
        return (f"--input-shape: only for pkg.module:factory models; {args.model} has its own "
                "input (use --batch-size)") if args.input_shape is not None else None
    if args.input_shape is None:
        return f"--input-shape: required for MODEL={args.model} (e.g. --input-shape 1,3,224,224)"
    try:
        shape = parse_shape(args.input_shape)
    except ValueError as exc:
        return f"--input-shape={args.input_shape!r}: {exc}"
    return None if shape else f"--input-shape={args.input_shape!r}: no dimensions"


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1,3,224,224"`` -> (1, 3, 224, 224); every dimension an int >= 1."""
    dims = []
    for part in text.split(","):
        if not part.strip().isdigit() or int(part) < 1:
            raise ValueError(f"{part.strip()!r} is not an int >= 1 (expected e.g. 1,3,224,224)")
        dims.append(int(part))
    return tuple(dims)


def is_factory(model: str) -> bool:
    """Whether MODEL names the user's own factory, ``pkg.module:attribute``."""
    kind, sep, _ = model.partition(":")
    return bool(sep) and kind not in BUILTIN_KINDS


def _factory_model(args: argparse.Namespace):
    """The user's ``pkg.module:factory()`` and one random input of --input-shape."""


    module_name, _, attribute = args.model.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ModelError(f"MODEL={args.model}: cannot load {attribute!r} from module "
                         f"{module_name!r} ({type(exc).__name__}: {exc})") from exc
    if not isinstance(factory, torch.nn.Module) and not callable(factory):
        raise ModelError(f"MODEL={args.model}: expected an nn.Module or a factory returning "
                         f"one, got {type(factory).__name__}")
    model = factory if isinstance(factory, torch.nn.Module) else factory()
    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"MODEL={args.model}: expected a factory returning an nn.Module, got "
                         f"{type(model).__name__}")
    dtype = getattr(torch, args.dtype)
    shape = parse_shape(args.input_shape)
    if dtype.is_floating_point:  # the parameters in the input's precision, as a user runs it
        return model.to(dtype), torch.randn(shape, dtype=dtype)
    return model, torch.randint(0, 2, shape, dtype=dtype)  # e.g. token ids


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
                         f"with torch {torch.__version__} ({exc}): "
                         f"{torchvision_advice(torch.__version__)}") from exc
    known = torchvision.models.list_models(module=torchvision.models)
    if name not in known:
        raise ModelError(f"MODEL=torchvision:{name}: not a torchvision classification model; "
                         f"one of: {', '.join(known)}")
    return torchvision.models.get_model(name, weights=None), torch.randn(batch, 3, 224, 224)


class _HFOutput:
    """transformers' models return a ModelOutput: the CLI differentiates its first tensor."""

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
                         f"{', '.join(HF_ALIASES)} ({exc})") from exc
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
        return model, _HFOutput(model), ids
    known = [n for n in MODELS if n in SAMPLE_SHAPES]
    if args.model not in known:
        raise ModelError(f"MODEL={args.model!r} is not one of: {', '.join(known)}, "
                         "torchvision:NAME, hf:NAME, pkg.module:factory")
    model = MODELS[args.model]()
    return model, model, torch.randn(args.batch_size, *SAMPLE_SHAPES[args.model])


def module_rows(model, counts: dict, depth: int) -> list[ModuleRow]:
    """Per-module rows (modules up to ``depth``, in module order; the root is level 1, as
    in the counter's table), named as the counter names them (root class name, then the
    qualified name)."""
    root = type(model).__name__
    rows = []
    for qualified, module in model.named_modules():
        level = 1 if not qualified else qualified.count(".") + 2  # the root is level 1
        if level > depth:
            continue
        name = root if not qualified else f"{root}.{qualified}"
        flops = sum(counts.get(name, {}).values())
        params = sum(p.numel() for p in module.parameters())
        rows.append(ModuleRow(name, level, flops, flops // 2, params))
    return rows


def human(count: int, unit: str) -> str:
    """``1819066368, "FLOPs"`` -> ``"1.82 GFLOPs"`` (powers of 1000, three significant digits)."""
    for factor, prefix in ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "K")):
        if abs(count) >= factor:
            return f"{count / factor:.3g} {prefix}{unit}"
    return f"{count} {unit}".rstrip()


@dataclass(frozen=True)
class Counted:
    """What one run measured, as plain data for the three formats."""

    model: dict  # {"spec": MODEL, "class": root class name, "kind": builtin/torchvision/...}
    inputs: list[dict]  # [{"shape": [...], "dtype": "float32", "device": "cpu"}]
    passes: list[str]  # ["forward"] or ["forward", "backward"]
    torch_version: str
    total_flops: int
    total_params: int
    modules: list[ModuleRow]
    ops: dict[str, int]  # op packet -> FLOPs (the counter's "Global" row)
    uncounted_ops: dict[str, int]  # op packet -> times seen without a formula


def as_json(c: Counted) -> str:
    return json.dumps({
        "model": c.model, "inputs": c.inputs, "passes": c.passes,
        "torch_version": c.torch_version,
        "total": {"flops": c.total_flops, "macs": c.total_flops // 2,
                  "params": c.total_params, "flops_human": human(c.total_flops, "FLOPs")},
        "modules": [asdict(r) for r in c.modules],
        "ops": [{"op": op, "flops": n, "macs": n // 2} for op, n in c.ops.items()],
        "uncounted_ops": c.uncounted_ops}, indent=2)


def as_csv(c: Counted) -> str:
    """One row per module, per op and per uncounted op; ``kind`` says which columns apply
    (``calls`` only for uncounted ops, ``depth`` and ``params`` only for modules)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["kind", "name", "depth", "flops", "macs", "params", "calls"])
    writer.writerows(["module", r.module, r.depth, r.flops, r.macs, r.params, ""]
                     for r in c.modules)
    writer.writerows(["op", op, "", n, n // 2, "", ""] for op, n in c.ops.items())
    writer.writerows(["uncounted_op", op, "", "", "", "", n]
                     for op, n in c.uncounted_ops.items())
    return out.getvalue().rstrip("\n")


def as_table(c: Counted) -> str:
    rows = c.modules
    width = max(len("  " * (r.depth - 1) + r.module) for r in rows)
    shapes = ", ".join(f"{'x'.join(map(str, i['shape']))} {i['dtype']}" for i in c.inputs)
    lines = [f"{c.model['spec']}: {' + '.join(c.passes)}, input {shapes} on "
             f"{c.inputs[0]['device']}, torch {c.torch_version}", "",
             f"{'Module':<{width}}  {'FLOPs':>16}  {'MACs':>16}  {'Params':>12}"]
    lines += [f"{'  ' * (r.depth - 1) + r.module:<{width}}  {r.flops:>16,}  {r.macs:>16,}  "
              f"{r.params:>12,}" for r in rows]
    lines += ["", f"{'Op':<{width}}  {'FLOPs':>16}"]
    lines += [f"{op:<{width}}  {n:>16,}" for op, n in c.ops.items()]
    lines += ["", "uncounted ops: " + (", ".join(f"{op} x{n}" for op, n in
                                                 c.uncounted_ops.items()) or "none"),
              f"total FLOPs: {c.total_flops} ({human(c.total_flops, 'FLOPs')})",
              f"total MACs: {c.total_flops // 2} ({human(c.total_flops // 2, 'MACs')})",
              f"total params: {c.total_params} ({human(c.total_params, '')})"]
    return "\n".join(lines)


RENDERERS = {"table": as_table, "json": as_json, "csv": as_csv}


def _kind(spec: str) -> str:
    if is_factory(spec):
        return "factory"
    kind, sep, _ = spec.partition(":")
    return kind if sep else "builtin"


def count(args: argparse.Namespace) -> Counted:
    """Build MODEL, run it once under the counter (and its backward with --backward)."""

    # loaded when the command runs: `refimpl --help` imports this module for its parser, and the
    # formula table loads torch's compiler (~1 s)
    from refimpl.flops.counter import FlopCounterMode

    torch.manual_seed(0)
    model, call, x = build(args)
    device = torch.device(args.device)
    model.to(device)
    x = x.to(device)
    if args.backward and x.is_floating_point():
        x.requires_grad_()
    with FlopCounterMode(depth=args.depth, display=False) as counter:
        out = call(x)
        if args.backward:
            out.float().sum().backward()
    by_op = counter.get_flop_counts().get("Global", {})
    uncounted = counter.uncounted_ops()
    return Counted(
        model={"spec": args.model, "class": type(model).__name__, "kind": _kind(args.model)},
        inputs=[{"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch."),
                 "device": str(x.device)}],
        passes=["forward", "backward"] if args.backward else ["forward"],
        torch_version=torch.__version__, total_flops=counter.get_total_flops(),
        total_params=sum(p.numel() for p in model.parameters()),
        modules=module_rows(model, counter.get_flop_counts(), args.depth),
        ops={str(op): n for op, n in sorted(by_op.items(), key=lambda i: str(i[0]))},
        uncounted_ops={str(op): n for op, n in sorted(uncounted.items(),
                                                      key=lambda i: str(i[0]))})


def _device_problem(text: str) -> str | None:
    try:
        device = torch.device(text)
    except RuntimeError as exc:
        return f"--device={text!r}: {exc}"
    if device.type == "cuda" and not torch.cuda.is_available():
        return f"--device={text!r}: this torch ({torch.__version__}) sees no CUDA device"
    return None


def run(args: argparse.Namespace) -> int:
    problem = _check(args) or _device_problem(args.device)
    if problem:
        return _bad(problem)
    try:
        counted = count(args)
    except ModelError as exc:
        return _bad(str(exc))
    body = RENDERERS[args.format](counted)
    if args.output:
        with open(args.output, "w") as f:
            f.write(body + "\n")
    else:
        print(body)
    return 0
