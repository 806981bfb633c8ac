"""``refimpl pareto MODEL``: the memory-vs-recompute curve over budgets 0..1 (PNG and CSV).

For each budget the model is compiled (dynamo caches reset first), one forward is measured
with the activation meter (saved bytes) and its backward with ``refimpl.FlopCounterMode``;
the recompute cost is the backward's FLOPs minus eager's. ``--compare torch`` measures
torch's ``aot_eager_decomp_partition`` the same way, so the two curves sit side by side.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import torch

HELP = "memory-vs-recompute curve of a model over memory budgets 0..1 (PNG + CSV)"

#: model name -> example input shape (small: the curve's shape does not need big inputs).
INPUTS = {"mlp": (8, 64), "transformer": (2, 32, 64), "resnet18": (2, 3, 32, 32)}
COLUMNS = ["backend", "budget", "saved_bytes", "recompute_flops"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", choices=sorted(INPUTS), help="model from refimpl.models")
    parser.add_argument("--points", type=int, default=11,
                        help="number of budgets, evenly spaced over [0, 1] (default 11)")
    parser.add_argument("--compare", choices=["torch"], default=None,
                        help="also draw torch's curve (aot_eager_decomp_partition)")
    parser.add_argument("--solver", default="dp", help="dp, ilp, greedy or brute")
    parser.add_argument("--out", default=None,
                        help="output prefix (default: pareto-MODEL): writes .png and .csv")


def _backward_flops(fn, x: torch.Tensor) -> int:
    from refimpl import FlopCounterMode

    out = fn(x).sum()
    with FlopCounterMode(display=False) as mode:
        out.backward()
    return mode.get_total_flops()


def measure_curve(model, x, budgets, compile_fn) -> list[tuple[float, int, int]]:
    """[(budget, saved bytes, recompute FLOPs)] for ``compile_fn(model, budget)``."""
    from refimpl import saved_activation_bytes

    eager = _backward_flops(model, x)
    rows = []
    for budget in budgets:
        torch._dynamo.reset()
        compiled = compile_fn(model, budget)
        compiled(x).sum().backward()  # compile once, outside the measurement
        saved = saved_activation_bytes(lambda c=compiled: c(x).sum())
        rows.append((budget, saved, _backward_flops(compiled, x) - eager))
    return rows


def _compilers(args) -> dict:
    import refimpl
    from refimpl.oracle import load_backend

    compilers = {"refimpl": lambda m, b: refimpl.compile(m, memory_budget=b,
                                                         solver=args.solver)}
    if args.compare == "torch":
        torch_backend = load_backend("torch")
        compilers["torch"] = lambda m, b: torch_backend.compile(m, memory_budget=b)
    return compilers


def plot(rows: list[list], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for backend in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == backend]
        ax.plot([r[2] / 2**20 for r in mine], [r[3] / 1e6 for r in mine], "o-",
                label=backend, alpha=0.8)
        for r in mine:
            ax.annotate(f"{r[1]:.1f}", (r[2] / 2**20, r[3] / 1e6), fontsize=7,
                        textcoords="offset points", xytext=(3, 3))
    ax.set_xlabel("activation memory saved for backward (MiB, meter)")
    ax.set_ylabel("recomputed FLOPs in backward (MFLOP)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    from refimpl.models import MODELS
    from refimpl.partition.options import SOLVERS

    if args.points < 2:
        print(f"--points={args.points} must be at least 2")
        return 2
    if args.solver not in SOLVERS:
        print(f"--solver={args.solver!r} is not one of {', '.join(SOLVERS)}")
        return 2
    torch.manual_seed(0)
    model = MODELS[args.model]()
    x = torch.randn(*INPUTS[args.model], requires_grad=True)
    budgets = [i / (args.points - 1) for i in range(args.points)]
    rows = [[name, b, saved, flops] for name, fn in _compilers(args).items()
            for b, saved, flops in measure_curve(model, x, budgets, fn)]
    prefix = Path(args.out or f"pareto-{args.model}")
    with open(prefix.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    plot(rows, prefix.with_suffix(".png"),
         f"{args.model}: memory budget 0..1 (labels: budget)")
    print(f"wrote {prefix.with_suffix('.csv')} and {prefix.with_suffix('.png')}")
    return 0
