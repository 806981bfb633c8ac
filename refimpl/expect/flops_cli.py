"""What ``refimpl flops MODEL`` must report, derived by hand (never by refimpl.flops).

The report of one run: per module up to ``depth`` (the model itself is level 1, a child of
it level 2, ...; in ``named_modules`` order), its name (the root's class name, then the
qualified name: ``Sequential.0``), its FLOPs, MACs (FLOPs // 2) and parameters; the total
FLOPs and parameters. FLOPs are the matrix products of :func:`refimpl.expect.flops.derive`
(forward, and the backward when the run differentiates), credited to the layer that ran
them and to every module above it. refimpl's own ``TransformerBlock`` calls SDPA itself
(no attention module to hook): its attention is added here by hand, ``q k^T`` and ``p v``
over the full ``S x S`` scores (a causal mask does not change the count, as torch's
convention for the flash kernels), the backward recomputing the scores.

Human-readable figures (``1.82 GFLOPs``) use powers of 1000 (K, M, G, T) and three
significant digits (as Python's ``.3g`` rounds the quotient): the smallest prefix at which
those digits print without an exponent, i.e. below 1000 of it (999,499 is ``999 K``, 999,999
rounds to ``1 M``, never ``1e+03 K``); below 1000 the plain number; from 1000 T on, whole
T with thousands separators (``1,000 T``: there is no larger prefix).

A torchvision that is missing or does not load is answered with the pip command that installs
the release pairing with the running torch (:func:`torchvision_pip`): torchvision 0.N pairs
with torch 2.(N - 15) (torchvision's README table: 0.15 with 2.0, 0.28 with 2.13); a CPU build
of torch (local version ``+cpu``) takes the CPU wheel from PyTorch's own index, since PyPI's
torchvision wheels pull in a CUDA torch; ``--no-deps`` keeps the installed torch either way.
No pairing is known outside torch 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from refimpl.expect.flops import FUSED_KERNELS, Product, _attention, derive

#: powers of 1000 and their prefixes, smallest first.
PREFIXES = ((10**3, "K"), (10**6, "M"), (10**9, "G"), (10**12, "T"))


@dataclass(frozen=True)
class ExpectedRow:
    """One module's expected line."""

    name: str
    depth: int
    flops: int
    params: int


@dataclass(frozen=True)
class ExpectedReport:
    """The figures a run must report."""

    rows: tuple[ExpectedRow, ...]
    total_flops: int
    total_params: int


def human(number: int, unit: str) -> str:
    """``1819066368, "FLOPs"`` -> ``"1.82 GFLOPs"``; ``512, "FLOPs"`` -> ``"512 FLOPs"``;
    ``999999, "MACs"`` -> ``"1 MMACs"``; ``10**15, "FLOPs"`` -> ``"1,000 TFLOPs"``.

    Scans the prefixes upwards and takes the first whose three significant digits print
    without an exponent (``.3g`` writes 1000 and more as ``1e+03``)."""
    if number < 1000:
        return f"{number} {unit}".strip()
    for power, prefix in PREFIXES:
        digits = f"{number / power:.3g}"
        if "e" not in digits:
            return f"{digits} {prefix}{unit}"
    return f"{number / 10**12:,.0f} T{unit}"


#: PyTorch's own index of CPU wheels.
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def torchvision_pip(torch_version: str) -> str | None:
    """The pip command installing the torchvision that pairs with ``torch_version`` (module
    docstring), or None when no pairing is known (not a torch 2 release)."""
    release, _, local = torch_version.partition("+")
    major, minor = release.split(".")[:2]
    if major != "2":
        return None
    command = f"pip install --no-deps 'torchvision==0.{int(minor) + 15}.*'"
    return f"{command} --index-url {CPU_INDEX}" if local == "cpu" else command


def torchvision_advice(torch_version: str) -> tuple[str, str]:
    """What the refusal of a missing or broken torchvision under ``torch_version`` must say
    and end with: the pip command of :func:`torchvision_pip` (both), or, where no release
    pairs, that none is known (and no pip command to end with)."""
    pip = torchvision_pip(torch_version)
    if pip is None:
        return f"no torchvision release is known to pair with torch {torch_version}", ""
    return pip, pip


def _block_attention(block: nn.Module, x: torch.Tensor, backward: bool) -> int:
    """refimpl.models.TransformerBlock's SDPA on ``x`` ``[B, S, dim]``, by hand."""
    batch, seq, dim = x.shape
    heads = block.heads
    products = _attention("sdpa", batch, heads, seq, seq, dim // heads, dim // heads,
                          recomputes=True)
    return sum(p.forward + (p.backward if backward else 0) for p in products)


def _unit_flops(products: tuple[Product, ...], backward: bool) -> int:
    return sum(p.forward + (p.backward if backward else 0) for p in products)


def _per_name(model: nn.Module, x: torch.Tensor, backward: bool) -> dict[str, int]:
    """{qualified name ("" for the root): FLOPs run by that module itself as a layer}."""
    root = type(model).__name__
    own: dict[str, int] = {}
    for unit in derive(model, (x,), backward=backward, rules=FUSED_KERNELS).units:
        name = "" if unit.name == root else unit.name
        own[name] = own.get(name, 0) + _unit_flops(unit.products, backward)
    for name, module in model.named_modules():
        if type(module).__name__ == "TransformerBlock":
            own[name] = own.get(name, 0) + _block_attention(module, x, backward)
    return own


def expected_report(model: nn.Module, x: torch.Tensor, depth: int,
                    backward: bool) -> ExpectedReport:
    """The report of ``model(x)`` (``x.requires_grad`` as the run sets it), by hand."""
    own = _per_name(model, x, backward)
    root = type(model).__name__
    rows = []
    for name, module in model.named_modules():
        level = 1 if not name else len(name.split(".")) + 1
        if level > depth:
            continue
        under = sum(n for unit, n in own.items()
                    if not name or unit == name or unit.startswith(name + "."))
        params = sum(p.numel() for p in module.parameters())
        rows.append(ExpectedRow(f"{root}.{name}" if name else root, level, under, params))
    return ExpectedReport(tuple(rows), sum(own.values()),
                          sum(p.numel() for p in model.parameters()))
