"""``refimpl pareto MODEL``: memory vs recompute, the optimum beside torch's plan and the
knapsack heuristic (PNG and CSV).

One trace: the model's joint graph is captured once (dynamo + AOTAutograd with inductor's
decompositions, as ``refimpl.compile`` and torch's ``aot_eager_decomp_partition`` trace it).
For each budget, three plans are scored by the same model (refimpl's plain joint graph:
activation bytes, each storage once; FLOPs of the forward nodes the backward recomputes):

* ``optimum``: refimpl's default solver (``solver="exact"``);
* ``knapsack``: torch's formulation solved exactly (``solver="dp"``), a heuristic for the
  problem: it never sees that saving a small value spares recomputing an expensive one;
* ``torch``: torch's own ``min_cut_rematerialization_partition`` at that budget (with
  ``--compare torch``, the default), scored by what its forward graph hands the backward.

This command sits above the components: it uses the partitioner's public functions and
torch's partitioner, and the components know nothing of it.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import sys
from pathlib import Path

import torch
import torch._functorch.config as fconfig

from refimpl.models import MODELS
from refimpl.partition.cut import recompute_cost, saved_bytes
from refimpl.partition.options import PartitionOptions
from refimpl.user_files import file_problem

HELP = "memory vs recompute over budgets 0..1: optimum, torch's plan, knapsack (PNG, CSV, JSON)"

#: model name -> example input shape (small: the curve's shape does not need big inputs).
INPUTS = {"mlp": (8, 64), "transformer": (2, 32, 64), "resnet18": (2, 3, 32, 32)}
#: programs that are not modules: the issue's summary-value program.
PROGRAMS = ("summary",)
COLUMNS = ["plan", "budget", "saved_bytes", "recompute_flops"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", choices=sorted([*INPUTS, *PROGRAMS]),
                        help="a model from refimpl.models, or 'summary' (small values "
                             "computed from expensive matmuls)")
    parser.add_argument("--points", type=int, default=11,
                        help="number of budgets, evenly spaced over [0, 1] (default 11)")
    parser.add_argument("--compare", choices=["torch", "none"], default="torch",
                        help="also draw torch's partitioner (default torch)")
    parser.add_argument("--out", default=None,
                        help="output prefix (default: pareto-MODEL): writes .png, .csv and "
                             ".json; a folder (existing, or ending in /) gets pareto-MODEL.*")


def summary_program(x, w1, w2, w3):
    """Row sums of two expensive matmuls, and a cheap one used whole."""
    s1, s2 = (x @ w1).sum(1), (x @ w2).amax(1)
    return (s1.cos() * s2.sin()).sum() + (x @ w3).cos().sum()


def example(name: str):
    """(function, example inputs) for a model name or program name."""

    torch.manual_seed(0)
    if name == "summary":
        shapes = [(64, 64), (64, 512), (64, 256), (64, 64)]
        return summary_program, [torch.randn(s, requires_grad=True) for s in shapes]
    return MODELS[name](), [torch.randn(*INPUTS[name], requires_grad=True)]


def capture_joint(fn, inputs) -> tuple[torch.fx.GraphModule, int]:
    """The joint graph (a copy) that ``refimpl.compile`` would partition, and its number of
    forward outputs."""
    # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import default_partition
    from torch._inductor.compile_fx import select_decomp_table

    captured = []

    def capture(joint, joint_inputs, *, num_fwd_outputs, **kwargs):
        captured.append((copy.deepcopy(joint), num_fwd_outputs))
        return default_partition(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs,
                                 **kwargs)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=lambda g, _: g, partition_fn=capture,
                           decompositions=select_decomp_table())
    torch.compile(lambda *a: fn(*a).sum(), backend=backend, fullgraph=True)(*inputs)
    return captured[0]


def torch_plan_cost(gm, num_fwd: int, graph, budget: float) -> tuple[int, float]:
    """(bytes, recompute FLOPs) of torch's partitioner at ``budget``, read from the graphs
    it returns: the bytes of what its forward hands the backward (each storage once, by
    ``graph``'s model), the runtime of the forward nodes its backward graph computes."""
    # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
    from torch._functorch.partitioners import min_cut_rematerialization_partition


    with fconfig.patch(activation_memory_budget=budget):
        fw, bw = min_cut_rematerialization_partition(copy.deepcopy(gm), None,
                                                     compiler="inductor",
                                                     num_fwd_outputs=num_fwd)
    outputs = next(iter(fw.graph.find_nodes(op="output"))).args[0][num_fwd:]
    saved = [n.name for n in outputs if isinstance(n, torch.fx.Node) and n.name in graph.by_name]
    redone = [n.name for n in bw.graph.nodes if n.op == "call_function"
              and n.name in graph.by_name and graph.by_name[n.name].role == "forward"]
    return saved_bytes(graph, saved), recompute_cost(graph, redone)


def curves(name: str, budgets: list[float], compare: bool) -> list[list]:
    """Rows ``[plan, budget, saved_bytes, recompute_flops]`` for the three plans."""
    # loaded when the command runs: `refimpl --help` imports this module for its parser, and the
    # partitioner loads scipy and the FLOP table (~1 s)
    from refimpl.partition.cost import flops_runtime
    from refimpl.partition.fx_edge import joint_graph_from_fx
    from refimpl.partition.partitioner import choose_many

    fn, inputs = example(name)
    gm, num_fwd = capture_joint(fn, inputs)
    graph = joint_graph_from_fx(copy.deepcopy(gm), num_fwd, flops_runtime)
    rows = []
    for label, solver in (("optimum", "exact"), ("knapsack", "dp")):
        plans = choose_many(graph, budgets, PartitionOptions(solver=solver, cse=False))
        rows += [[label, p.memory_budget, p.saved_bytes, p.recompute_cost] for p in plans]
    if compare:
        rows += [["torch", b, *torch_plan_cost(gm, num_fwd, graph, b)] for b in budgets]
    return rows


#: curve -> (marker, linestyle, marker size, offset in points): the curves often coincide,
#: so each is drawn a few points apart, with its own marker and line, so none hides another.
STYLES = {"optimum": ("o", "-", 9, (0, 0)), "torch": ("s", "--", 7, (4, 4)),
          "knapsack": ("^", ":", 7, (-4, -4))}
BUDGET_ONE_NOTE = ("budget 1.0 returns the runtime-optimised plan (the min-cut torch makes "
                   "with no budget), not the\nleast-recompute plan within a bound: the last "
                   "point may jump (docs/design.md, \"Budget 1.0 is special\")")


def _budget_labels(ax, rows: list[list], label: str, scale: float,
                   offset: tuple[int, int]) -> None:
    """Write the budgets beside each point of curve ``label`` (several budgets that give the
    same plan share one label, ``0.4-0.9``): every point of the optimum, and the points of
    the other curves that lie elsewhere than the optimum's at the same budgets."""
    optimum = {r[1]: (r[2], r[3]) for r in rows if r[0] == "optimum"}
    at_point: dict[tuple, list[float]] = {}
    for _plan, budget, saved, flops in (r for r in rows if r[0] == label):
        if label == "optimum" or optimum.get(budget) != (saved, flops):
            at_point.setdefault((saved, flops), []).append(budget)
    for (saved, flops), budgets in at_point.items():
        text = f"{min(budgets):g}" if len(budgets) == 1 else f"{min(budgets):g}-{max(budgets):g}"
        ax.annotate(text, (saved / scale, flops / 1e6), textcoords="offset points",
                    xytext=(5 + offset[0], 3 + offset[1]), fontsize=7,
                    color=ax.lines[-1].get_color())


def plot(rows: list[list], path: Path, title: str) -> None:
    """Saved bytes against recomputed FLOPs, one curve per plan, budgets written on points."""
    # loaded when the command runs: `refimpl --help` imports this module for its parser, and pyplot
    # takes ~0.2 s
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import offset_copy

    unit, scale = ("MiB", 2**20) if max(r[2] for r in rows) >= 2**20 else ("KiB", 2**10)
    fig, ax = plt.subplots(figsize=(8, 6))
    for label in dict.fromkeys(r[0] for r in rows):
        mine = sorted((r for r in rows if r[0] == label), key=lambda r: r[1])
        marker, line, size, (dx, dy) = STYLES.get(label, ("o", "-", 6, (0, 0)))
        shown = label if (dx, dy) == (0, 0) else f"{label} (drawn {abs(dx)} pt apart)"
        (curve,) = ax.plot([r[2] / scale for r in mine], [r[3] / 1e6 for r in mine],
                           marker=marker, linestyle=line, label=shown, markersize=size,
                           markerfacecolor="none")
        # shifted after plotting, so the axes' limits still come from the data
        curve.set_transform(offset_copy(ax.transData, fig=fig, x=dx, y=dy, units="points"))
        _budget_labels(ax, rows, label, scale, (dx, dy))
    ax.set_xlabel(f"activation memory saved for backward ({unit})")
    ax.set_ylabel("recomputed FLOPs in backward (MFLOP)")
    ax.set_title(f"{title}\n(numbers on points: the memory budget)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.text(0.01, 0.01, BUDGET_ONE_NOTE, fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def out_prefix(out: str | None, model: str) -> Path:
    """The path both files share, less their suffix: ``--out`` as given, or inside it when it
    names a folder (an existing one, or one written with a trailing slash)."""
    default = f"pareto-{model}"
    if out is None:
        return Path(default)
    if out.endswith(("/", os.sep)) or Path(out).is_dir():
        return Path(out) / default
    return Path(out)


def _check_out(prefix: Path) -> str | None:
    """Why ``--out`` cannot be written (checked before any work), or None."""
    for suffix in (".csv", ".json", ".png"):
        problem = file_problem(prefix.with_suffix(suffix))
        if problem:
            return f"--out={prefix}: {problem}"
    return None


def run(args: argparse.Namespace) -> int:
    if args.points < 2:
        print(f"refimpl pareto: error: --points={args.points} must be at least 2",
              file=sys.stderr)
        return 2
    if args.out is not None and not args.out.strip():  # never read as the current folder
        print("refimpl pareto: error: --out='': name a file prefix or a folder",
              file=sys.stderr)
        return 2
    prefix = out_prefix(args.out, args.model)
    if not prefix.parent.exists() and not file_problem(prefix.parent) and args.out.endswith("/"):
        prefix.parent.mkdir()  # `--out new/`: the folder the user named, made once
    problem = _check_out(prefix)
    if problem:
        print(f"refimpl pareto: error: {problem}", file=sys.stderr)
        return 2
    budgets = [i / (args.points - 1) for i in range(args.points)]
    rows = curves(args.model, budgets, args.compare == "torch")
    with open(prefix.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    prefix.with_suffix(".json").write_text(json.dumps(
        {"model": args.model, "budget_1_note": BUDGET_ONE_NOTE.replace("\n", " "),
         "rows": [dict(zip(COLUMNS, row, strict=True)) for row in rows]}, indent=2))
    plot(rows, prefix.with_suffix(".png"), f"{args.model}: budgets 0..1, same cost model")
    written = ", ".join(str(prefix.with_suffix(s)) for s in (".csv", ".json", ".png"))
    print(f"wrote {written}")
    return 0
