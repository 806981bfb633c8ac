"""``refimpl flops MODEL``: the per-module FLOP table of a model's forward (and backward).

Builds ``refimpl.models.MODELS[MODEL]``, runs it on a random batch under FlopCounterMode,
and prints the table and the total. Exit status: 0, or 2 for bad arguments (an unknown
model, a batch size or depth out of range), with the allowed values in the message.
"""

from __future__ import annotations

import argparse
import sys

HELP = "print the per-module FLOP table of a model's forward and backward"

#: one sample's shape (the batch dimension is added in front) for each model.
SAMPLE_SHAPES: dict[str, tuple[int, ...]] = {
    "resnet18": (3, 224, 224),
    "transformer": (128, 64),
    "mlp": (64,),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL",
                        help=f"one of: {', '.join(SAMPLE_SHAPES)}")
    parser.add_argument("--batch-size", type=int, default=1,
                        help="samples per batch (default 1; resnet18 input 1x3x224x224)")
    parser.add_argument("--depth", type=int, default=2,
                        help="deepest module level shown in the table (default 2)")
    parser.add_argument("--backward", action=argparse.BooleanOptionalAction, default=True,
                        help="count the backward too (default: yes)")


def _bad(message: str) -> int:
    print(f"refimpl flops: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    import torch

    from refimpl.flops.counter import FlopCounterMode
    from refimpl.models import MODELS

    known = [name for name in MODELS if name in SAMPLE_SHAPES]
    if args.model not in known:
        return _bad(f"MODEL={args.model!r} is not one of: {', '.join(known)}")
    if args.batch_size < 1:
        return _bad(f"--batch-size={args.batch_size}: expected an int >= 1")
    if args.depth < 0:
        return _bad(f"--depth={args.depth}: expected an int >= 0")
    torch.manual_seed(0)
    model = MODELS[args.model]()
    x = torch.randn(args.batch_size, *SAMPLE_SHAPES[args.model], requires_grad=args.backward)
    with FlopCounterMode(depth=args.depth, display=False) as counter:
        out = model(x)
        if args.backward:
            out.sum().backward()
    passes = "forward + backward" if args.backward else "forward"
    print(f"{args.model}, batch {args.batch_size}, {passes}")
    print(counter.get_table())
    print(f"total FLOPs: {counter.get_total_flops()}")
    return 0
