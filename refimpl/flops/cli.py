"""``refimpl flops MODEL``: a model's FLOPs, MACs and parameters per module.

MODEL is one of refimpl's own (``resnet18``, ``transformer``, ``mlp``), a torchvision model
(``torchvision:resnet50``, random weights, a 3x224x224 image) or a transformers model built
from its config class (``hf:gpt2``, ``hf:bert``, ``hf:llama``, or any ``hf:MODEL_TYPE``;
random weights, nothing downloaded; ``--seq-len`` tokens; ``--layers`` overrides the layer
count). It runs one batch under refimpl's FlopCounterMode (forward, and backward unless
``--no-backward``) and prints, per module up to ``--depth``: FLOPs, MACs (FLOPs / 2: refimpl
counts only matrix products, one multiply-accumulate each is 2 FLOPs) and parameters; then
the ops it ran that do arithmetic but have no formula (never a silent 0). ``--format json``
or ``csv`` exports the same (``--output FILE`` writes it to a file).

Exit status: 0; 2 for bad arguments (an unknown model, a value out of range) or a model
whose package is not installed, with the allowed values or the package to install named.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from refimpl.outputs import file_problem

HELP = "print a model's FLOPs, MACs and parameters per module (forward and backward)"

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
                             f"hf:NAME ({', '.join(HF_ALIASES)} or a transformers model type)")
    parser.add_argument("--batch-size", type=int, default=1,
                        help="samples per batch (default 1; resnet18 input 1x3x224x224)")
    parser.add_argument("--depth", type=int, default=2,
                        help="deepest module level shown, the model itself is 1 (default 2)")
    parser.add_argument("--backward", action=argparse.BooleanOptionalAction, default=True,
                        help="count the backward too (default: yes)")
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
    problem = args.output and file_problem(Path(args.output))
    return f"--output={args.output}: {problem}" if problem else None


def _torchvision_model(name: str, batch: int):
    import torch

    try:
        import torchvision
    except ImportError as exc:
        raise ModelError(f"MODEL=torchvision:{name} needs torchvision, which is not installed "
                         f"({exc}): pip install torchvision (the release matching your "
                         "torch)") from exc
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
    import torch

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
    import torch

    from refimpl.models import MODELS

    kind, sep, name = args.model.partition(":")
    if sep and kind == "torchvision":
        model, x = _torchvision_model(name, args.batch_size)
        return model, model, x
    if sep and kind == "hf":
        model, ids = _hf_model(name, args.batch_size, args.seq_len, args.layers)
        return model, _HFOutput(model), ids
    known = [n for n in MODELS if n in SAMPLE_SHAPES]
    if args.model not in known:
        raise ModelError(f"MODEL={args.model!r} is not one of: {', '.join(known)}, "
                         "torchvision:NAME, hf:NAME")
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


def render(rows: list[ModuleRow], uncounted: dict, fmt: str, title: str) -> str:
    """The rows and the uncounted ops as a table, JSON or CSV."""
    ops = {str(op): n for op, n in sorted(uncounted.items(), key=lambda i: str(i[0]))}
    if fmt == "json":
        return json.dumps({"model": title, "modules": [asdict(r) for r in rows],
                           "uncounted_ops": ops}, indent=2)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["kind", "name", "depth", "flops", "macs", "params", "calls"])
        writer.writerows(["module", r.module, r.depth, r.flops, r.macs, r.params, ""]
                         for r in rows)
        writer.writerows(["uncounted_op", op, "", "", "", "", n] for op, n in ops.items())
        return out.getvalue().rstrip("\n")
    width = max(len("  " * (r.depth - 1) + r.module) for r in rows)
    lines = [f"{'Module':<{width}}  {'FLOPs':>16}  {'MACs':>16}  {'Params':>12}"]
    lines += [f"{'  ' * (r.depth - 1) + r.module:<{width}}  {r.flops:>16,}  {r.macs:>16,}  "
              f"{r.params:>12,}" for r in rows]
    lines.append("uncounted ops: " + (", ".join(f"{op} x{n}" for op, n in ops.items())
                                      or "none"))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import torch

    from refimpl.flops.counter import FlopCounterMode

    problem = _check(args)
    if problem:
        return _bad(problem)
    torch.manual_seed(0)
    try:
        model, call, x = build(args)
    except ModelError as exc:
        return _bad(str(exc))
    if args.backward and x.is_floating_point():
        x.requires_grad_()
    with FlopCounterMode(depth=args.depth, display=False) as counter:
        out = call(x)
        if args.backward:
            out.float().sum().backward()
    rows = module_rows(model, counter.get_flop_counts(), args.depth)
    passes = "forward + backward" if args.backward else "forward"
    title = f"{args.model}, batch {args.batch_size}, {passes}"
    body = render(rows, counter.uncounted_ops(), args.format, title)
    if args.format == "table":
        body = "\n".join([title, counter.get_table(), "", body,
                          f"total FLOPs: {counter.get_total_flops()}",
                          f"total params: {sum(p.numel() for p in model.parameters())}"])
    if args.output:
        with open(args.output, "w") as f:
            f.write(body + "\n")
    else:
        print(body)
    return 0
