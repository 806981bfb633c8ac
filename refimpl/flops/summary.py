"""What ``refimpl flops`` measures (one batch under FlopCounterMode) and its three formats.

The count runs the forward once; with ``backward`` it sums the output and runs autograd, as
one training step does: gradients of the parameters only, unless ``input_grad`` also asks
for the input's (a layer then also computes the gradient of its input, e.g. a first
convolution's ``convolution_backward`` doubles). Totals are exact integers; the MACs are
FLOPs / 2 (refimpl counts matrix products only, one multiply-accumulate is 2 FLOPs).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from dataclasses import asdict, dataclass
from typing import Any

import torch

from refimpl.flops.counter import FlopCounterMode
from refimpl.flops.models import ModelError, build, input_arguments, is_factory, one_line


@dataclass(frozen=True)
class ModuleRow:
    """One module's line: its name, depth, FLOPs, MACs (FLOPs / 2) and parameters."""

    module: str
    depth: int
    flops: int
    macs: int
    params: int


@dataclass(frozen=True)
class Counted:
    """What one run measured, as plain data for the three formats."""

    model: dict  # {"spec": MODEL, "class": root class name, "kind": builtin/torchvision/...}
    inputs: list[dict]  # [{"shape": [...], "dtype": "float32", "device": "cpu"}]
    passes: list[str]  # ["forward"] or ["forward", "backward"]
    gradients: list[str]  # what the backward differentiates: [], ["parameters"], + "input"
    torch_version: str
    total_flops: int
    total_params: int
    modules: list[ModuleRow]
    ops: dict[str, int]  # op packet -> FLOPs (the counter's "Global" row)
    uncounted_ops: dict[str, int]  # op packet -> times seen without a formula


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


def _kind(spec: str) -> str:
    if is_factory(spec):
        return "factory"
    kind, sep, _ = spec.partition(":")
    return kind if sep else "builtin"


def _gradients(args: argparse.Namespace, model, x: torch.Tensor) -> list[str]:
    """What the backward differentiates; ModelError where it cannot run as asked."""
    if not args.backward:
        return []
    if args.input_grad and not x.is_floating_point():
        raise ModelError(f"--input-grad: the input is {str(x.dtype).removeprefix('torch.')}; "
                         "only a floating-point input has a gradient")
    wanted = ["parameters"] if any(p.requires_grad for p in model.parameters()) else []
    if not wanted and not args.input_grad:
        raise ModelError(f"--backward: MODEL={args.model} has no parameter that requires grad, "
                         "so a training step has no backward; add --input-grad to count the "
                         "input's gradient")
    return wanted + (["input"] if args.input_grad else [])


def _run(args: argparse.Namespace, call, x: torch.Tensor) -> None:
    """The forward (and the backward) under the active counter; failures as ModelError."""
    try:
        out = call(x)
    except Exception as exc:
        raise ModelError(f"{input_arguments(args)}: the forward of MODEL={args.model} raised "
                         f"{one_line(exc)}") from exc
    if not args.backward:
        return
    if not isinstance(out, torch.Tensor):
        raise ModelError(f"--backward: the forward of MODEL={args.model} returned "
                         f"{type(out).__name__}, not a tensor to differentiate")
    try:
        out.float().sum().backward()
    except Exception as exc:
        raise ModelError(f"--backward: the backward of MODEL={args.model} raised "
                         f"{one_line(exc)}") from exc


def count(args: argparse.Namespace, counter_class: Any = FlopCounterMode) -> Counted:
    """Build MODEL, run it once under the counter (and its backward with --backward).

    ``counter_class(depth=, display=)`` makes the counter: refimpl's FlopCounterMode, or
    another backend's (the property suite runs this path with the backend under test's)."""
    torch.manual_seed(0)
    model, call, x = build(args)
    device = torch.device(args.device)
    model.to(device)
    x = x.to(device)
    gradients = _gradients(args, model, x)
    x.requires_grad_("input" in gradients)
    with counter_class(depth=args.depth, display=False) as counter:
        _run(args, call, x)
    by_op = counter.get_flop_counts().get("Global", {})
    uncounted = counter.uncounted_ops()
    return Counted(
        model={"spec": args.model, "class": type(model).__name__, "kind": _kind(args.model)},
        inputs=[{"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch."),
                 "device": str(x.device)}],
        passes=["forward", "backward"] if args.backward else ["forward"],
        gradients=gradients, torch_version=torch.__version__,
        total_flops=counter.get_total_flops(),
        total_params=sum(p.numel() for p in model.parameters()),
        modules=module_rows(model, counter.get_flop_counts(), args.depth),
        ops={str(op): n for op, n in sorted(by_op.items(), key=lambda i: str(i[0]))},
        uncounted_ops={str(op): n for op, n in sorted(uncounted.items(),
                                                      key=lambda i: str(i[0]))})


#: powers of 1000 and their prefixes, largest first.
PREFIXES = ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "K"))


def human(count: int, unit: str) -> str:
    """``1819066368, "FLOPs"`` -> ``"1.82 GFLOPs"`` (powers of 1000, three significant digits).

    The prefix is the largest that the count, once rounded to three significant digits,
    reaches: 999,999 rounds to ``1 MFLOPs`` (not ``1e+03 KFLOPs``). Below 1000 the plain
    count; from 1000 T on (no larger prefix) whole T with thousands separators."""
    for factor, prefix in PREFIXES:
        digits = f"{count / factor:.3g}"
        rounded = float(digits)
        if rounded >= 1000:  # only past the largest prefix: a smaller one was taken below 1000
            return f"{count / factor:,.0f} {prefix}{unit}"
        if rounded >= 1:
            return f"{digits} {prefix}{unit}"
    return f"{count} {unit}".rstrip()


def as_json(c: Counted) -> str:
    return json.dumps({
        "model": c.model, "inputs": c.inputs, "passes": c.passes, "gradients": c.gradients,
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


def _passes(c: Counted) -> str:
    """``forward`` or ``forward + backward (parameter and input gradients)``."""
    if not c.gradients:
        return " + ".join(c.passes)
    return f"{' + '.join(c.passes)} ({' and '.join(g.removesuffix('s') for g in c.gradients)}"\
           " gradients)"


def as_table(c: Counted) -> str:
    """The module table, then the op table, each as wide as its own longest name."""
    names = ["  " * (r.depth - 1) + r.module for r in c.modules]
    width = max(len("Module"), *map(len, names))
    op_width = max([len("Op"), *map(len, c.ops)])
    shapes = ", ".join(f"{'x'.join(map(str, i['shape']))} {i['dtype']}" for i in c.inputs)
    lines = [f"{c.model['spec']}: {_passes(c)}, input {shapes} on "
             f"{c.inputs[0]['device']}, torch {c.torch_version}", "",
             f"{'Module':<{width}}  {'FLOPs':>16}  {'MACs':>16}  {'Params':>12}"]
    lines += [f"{name:<{width}}  {r.flops:>16,}  {r.macs:>16,}  {r.params:>12,}"
              for name, r in zip(names, c.modules)]
    lines += ["", f"{'Op':<{op_width}}  {'FLOPs':>16}"]
    lines += [f"{op:<{op_width}}  {n:>16,}" for op, n in c.ops.items()]
    lines += ["", "uncounted ops: " + (", ".join(f"{op} x{n}" for op, n in
                                                 c.uncounted_ops.items()) or "none"),
              f"total FLOPs: {c.total_flops} ({human(c.total_flops, 'FLOPs')})",
              f"total MACs: {c.total_flops // 2} ({human(c.total_flops // 2, 'MACs')})",
              f"total params: {c.total_params} ({human(c.total_params, '')})"]
    return "\n".join(lines)


RENDERERS = {"table": as_table, "json": as_json, "csv": as_csv}
