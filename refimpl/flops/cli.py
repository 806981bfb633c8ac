"""``refimpl flops MODEL``: a model's FLOPs, MACs and parameters per module.

MODEL is one of refimpl's own (``resnet18``, ``transformer``, ``mlp``), a torchvision model
(``torchvision:resnet50``, random weights, a 3x224x224 image), a transformers model built
from its config class (``hf:gpt2``, ``hf:bert``, ``hf:llama``, or any ``hf:MODEL_TYPE``;
random weights, nothing downloaded; ``--seq-len`` tokens; ``--layers`` overrides the layer
count), or the user's own: ``module:factory`` (found in the current folder first, as
``refimpl fuzz --target`` finds a backend), a callable taking no arguments that returns an
``nn.Module`` whose forward takes one tensor, run on one random tensor of ``--input-shape``
(batch included), ``--dtype`` and ``--device``. :mod:`refimpl.flops.models` builds MODEL.

It runs one batch under refimpl's FlopCounterMode (the forward; ``--backward`` adds the
backward of a training step: parameter gradients only, ``--input-grad`` adds the input's) and
prints, per module up to ``--depth``: FLOPs, MACs and parameters; the FLOPs per op; then the
ops it ran that do arithmetic but have no formula (never a silent 0). ``--format json`` or
``csv`` exports the same (``--output FILE`` writes it to a file); see
:mod:`refimpl.flops.summary`.

Exit status: 0; 2 for bad arguments and for a MODEL that cannot be built or run as asked
(an unknown model, a value out of range, a package not installed, the user's module or
factory or forward raising, an input that does not fit), in one line naming the argument.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import torch

from refimpl.flops.counter import FlopCounterMode
from refimpl.flops.models import (
    DTYPES,
    HF_ALIASES,
    SAMPLE_SHAPES,
    ModelError,
    is_factory,
    parse_shape,
)
from refimpl.flops.summary import RENDERERS, count
from refimpl.user_files import file_problem

HELP = "print a model's FLOPs, MACs and parameters per module and per op (forward by default)"
FORMATS = tuple(RENDERERS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # a value such as `--input-shape -1,3` is a value, not an option (Python 3.13's argparse
    # reads it so; 3.11's would say "expected one argument"): no option here starts -DIGIT
    parser._negative_number_matcher = re.compile(r"^-\.?\d")
    parser.add_argument("model", metavar="MODEL",
                        help=f"one of: {', '.join(SAMPLE_SHAPES)}; torchvision:NAME; "
                             f"hf:NAME ({', '.join(HF_ALIASES)} or a transformers model type); "
                             "or module:factory (your own, found in the current folder "
                             "first; needs --input-shape)")
    parser.add_argument("--input-shape", metavar="N,C,H,W", default=None,
                        help="module:factory models: the shape of the one input tensor, batch "
                             "included (e.g. 1,3,224,224)")
    parser.add_argument("--dtype", default=None,
                        help=f"module:factory models: the input's dtype, one of: "
                             f"{', '.join(DTYPES)} (default float32)")
    parser.add_argument("--device", default="cpu",
                        help="where the model and input live (default cpu; e.g. cuda)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="samples per batch for refimpl's, torchvision: and hf: models "
                             "(default 1; resnet18 input 1x3x224x224)")
    parser.add_argument("--depth", type=int, default=2,
                        help="deepest module level shown, the model itself is 1 (default 2)")
    parser.add_argument("--backward", action=argparse.BooleanOptionalAction, default=False,
                        help="count the backward too, as a training step runs it: the "
                             "gradients of the parameters only (default: forward only)")
    parser.add_argument("--input-grad", action=argparse.BooleanOptionalAction, default=False,
                        help="with --backward: count the input's gradient too (a layer then "
                             "also computes the gradient of its input)")
    parser.add_argument("--format", default="table", help=f"one of: {', '.join(FORMATS)}")
    parser.add_argument("--output", metavar="FILE", help="write the output to FILE")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="tokens per sample for hf: models (default 64)")
    parser.add_argument("--layers", type=int, default=None,
                        help="hf: models: number of layers (default: the config's)")


#: defaults of the options that only some MODELs take (None: not given, so not refused).
DEFAULTS = {"dtype": "float32", "batch_size": 1, "seq_len": 64}


def _bad(message: str) -> int:
    print(f"refimpl flops: error: {message}", file=sys.stderr)
    return 2


def _check(args: argparse.Namespace) -> str | None:
    """The first bad argument's message, or None."""
    for name, value in (("--batch-size", args.batch_size), ("--depth", args.depth),
                        ("--seq-len", args.seq_len), ("--layers", args.layers)):
        if value is not None and value < 1:
            return f"{name}={value}: expected an int >= 1"
    if args.format not in FORMATS:
        return f"--format={args.format!r}: expected one of {', '.join(FORMATS)}"
    if args.dtype is not None and args.dtype not in DTYPES:
        return f"--dtype={args.dtype!r}: expected one of {', '.join(DTYPES)}"
    problem = _not_taken(args)
    if problem:
        return problem
    if args.input_grad and not args.backward:
        return "--input-grad: counts the input's gradient in the backward; add --backward"
    problem = _shape_problem(args) or _device_problem(args.device)
    if problem:
        return problem
    problem = args.output and file_problem(Path(args.output))
    return f"--output={args.output}: {problem}" if problem else None


def _not_taken(args: argparse.Namespace) -> str | None:
    """An option given for a MODEL that does not take it (never silently ignored)."""
    factory, hf = is_factory(args.model), args.model.startswith("hf:")
    for flag, value, taken, takers in (
            ("--dtype", args.dtype, factory, "module:factory models"),
            ("--batch-size", args.batch_size, not factory,
             "refimpl's, torchvision: and hf: models (a factory's batch is the first "
             "dimension of --input-shape)"),
            ("--seq-len", args.seq_len, hf, "hf: models"),
            ("--layers", args.layers, hf, "hf: models")):
        if value is not None and not taken:
            return f"{flag}: only for {takers}, not MODEL={args.model}"
    return None


def _with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with DEFAULTS for the options not given."""
    given = {name: value for name, value in vars(args).items() if value is not None}
    return argparse.Namespace(**{**vars(args), **DEFAULTS, **given})


def _shape_problem(args: argparse.Namespace) -> str | None:
    """--input-shape is required for a module:factory MODEL and refused for the others."""
    if not is_factory(args.model):
        return (f"--input-shape: only for module:factory models; {args.model} has its own "
                "input (use --batch-size)") if args.input_shape is not None else None
    if args.input_shape is None:
        return f"--input-shape: required for MODEL={args.model} (e.g. --input-shape 1,3,224,224)"
    try:
        parse_shape(args.input_shape)
    except ValueError as exc:
        return f"--input-shape={args.input_shape!r}: {exc}"
    return None


def _device_problem(text: str) -> str | None:
    try:
        device = torch.device(text)
    except RuntimeError as exc:
        return f"--device={text!r}: {str(exc).splitlines()[0]}"
    if device.type == "cuda" and not torch.cuda.is_available():
        return f"--device={text!r}: this torch ({torch.__version__}) sees no CUDA device"
    return None


def run(args: argparse.Namespace, counter_class: Any = FlopCounterMode) -> int:
    """Check the arguments, count (``counter_class``: see :func:`refimpl.flops.summary.count`)
    and print or write the chosen format; the exit status."""
    problem = _check(args)
    if problem:
        return _bad(problem)
    try:
        counted = count(_with_defaults(args), counter_class)
    except ModelError as exc:
        return _bad(str(exc))
    body = RENDERERS[args.format](counted)
    if args.output:
        with open(args.output, "w") as f:
            f.write(body + "\n")
    else:
        print(body)
    return 0
