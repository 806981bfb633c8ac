"""Regenerate the table of docs/flop-counters.md: every FLOP counter on the same models.

    python benchmarks/flop_counters_table.py                 # print the table
    python benchmarks/flop_counters_table.py --write docs/flop-counters.md

Counters: refimpl, torch (``torch.utils.flop_counter``) and the six peers (seven targets:
ptflops has two backends), each through its ``model_flops`` target (peers convert MACs to
FLOPs). Models: torchvision's resnet18, resnet50, mobilenet_v3_small, efficientnet_b0,
convnext_tiny, vit_b_16 (also under inference_mode), swin_t (random weights, 1x3x224x224),
a ConvTranspose2d decoder with groups and output_padding, an LSTM+GRU model, an SDPA model,
and GPT-2, BERT and a grouped-query Llama of two layers built from transformers' config
classes (random weights, nothing downloaded, 64 tokens). All in eval mode.

Each cell is checked against :func:`refimpl.expect.flops.derive`, an independent
hand derivation, adjusted by the counter's stated conventions
(:class:`refimpl.oracle.targets.flop_peers.FlopConventions`):
``ok`` equal; ``WRONG`` differs beyond the stated conventions; ``>=`` the counter also counts
elementwise ops (its convention) and is at least the expected count; ``est`` a family the
counter counts with its own extra arithmetic ran (not exactly comparable); ``error`` the
counter raised. Backward (refimpl and torch; the peers count only forward) is checked the
same way. Needs torchvision and the ``peers`` extra (transformers included).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from refimpl.expect.flops import Derivation, derive
from refimpl.oracle import MissingExtra, load_backend
from refimpl.oracle.targets.flop_peers import REFERENCE, conventions_of
from refimpl.strategies.flop_models import SdpaBlock

COUNTERS = ("refimpl", "torch", "fvcore", "ptflops", "ptflops-aten", "thop", "calflops",
            "deepspeed", "torchprofile")
BACKWARD_COUNTERS = ("refimpl", "torch")
START, END = "<!-- flop-counters-table:start -->", "<!-- flop-counters-table:end -->"


@dataclass
class TableModel:
    """One row: the model, its inputs, whether it has elementwise layers (activations,
    norms, pools) besides its matrix products, and whether it runs under inference_mode."""

    model: nn.Module
    inputs: tuple
    elementwise: bool = True
    inference: bool = False


class _FirstTensor(nn.Module):
    """A transformers model returning its logits / last hidden state only (traceable)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, use_cache=False, return_dict=False)[0]


def _torchvision(name: str, inference: bool = False) -> Callable[[], TableModel]:
    def build() -> TableModel:
        import torchvision

        model = torchvision.models.get_model(name, weights=None)
        return TableModel(model, (torch.randn(1, 3, 224, 224),), inference=inference)
    return build


def _decoder() -> TableModel:
    model = nn.Sequential(
        nn.ConvTranspose2d(64, 48, 3, stride=2, padding=1, output_padding=1, groups=4),
        nn.ConvTranspose2d(48, 24, 4, stride=2, padding=1, groups=3),
        nn.ConvTranspose2d(24, 3, 3, stride=2, padding=1, output_padding=1))
    return TableModel(model, (torch.randn(1, 64, 16, 16),), elementwise=False)


class LstmGru(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(64, 128, num_layers=2, batch_first=True)
        self.gru = nn.GRU(128, 64, batch_first=True, bidirectional=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gru(self.lstm(x)[0])[0]


def _lstm_gru() -> TableModel:
    return TableModel(LstmGru(), (torch.randn(2, 32, 64),), elementwise=False)


def _sdpa() -> TableModel:
    model = nn.Sequential(SdpaBlock(256, 8, 8, bias=True, causal=True),
                          SdpaBlock(256, 8, 2, bias=False, causal=False))
    return TableModel(model, (torch.randn(2, 128, 256),), elementwise=False)


def _hf(kind: str) -> TableModel:
    import transformers as tf

    common = {"attn_implementation": "sdpa"}
    if kind == "gpt2":
        config = tf.GPT2Config(n_layer=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                               **common)
        model = tf.GPT2LMHeadModel(config)
    elif kind == "bert":
        config = tf.BertConfig(num_hidden_layers=2, hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0, **common)
        model = tf.BertModel(config, add_pooling_layer=False)  # every product on the loss path
    else:
        config = tf.LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=2,
                                num_attention_heads=8, num_key_value_heads=2,
                                vocab_size=32000, **common)
        model = tf.LlamaForCausalLM(config)
    ids = torch.randint(0, config.vocab_size, (1, 64), generator=torch.Generator().manual_seed(0))
    return TableModel(_FirstTensor(model), (ids,))


MODELS: dict[str, Callable[[], TableModel]] = {
    "resnet18": _torchvision("resnet18"),
    "resnet50": _torchvision("resnet50"),
    "mobilenet_v3_small": _torchvision("mobilenet_v3_small"),
    "efficientnet_b0": _torchvision("efficientnet_b0"),
    "convnext_tiny": _torchvision("convnext_tiny"),
    "vit_b_16": _torchvision("vit_b_16"),
    "vit_b_16 (inference_mode)": _torchvision("vit_b_16", inference=True),
    "swin_t": _torchvision("swin_t"),
    "convtranspose decoder": _decoder,
    "lstm+gru": _lstm_gru,
    "sdpa": _sdpa,
    "gpt2 (2 layers)": lambda: _hf("gpt2"),
    "bert (2 layers)": lambda: _hf("bert"),
    "llama gqa (2 layers)": lambda: _hf("llama"),
}


def verdict(name: str, backend, observed: int, d: Derivation, elementwise: bool) -> str:
    """ok / WRONG / >= / est for one forward cell (see the module docstring)."""
    conventions = conventions_of(backend) if name not in ("refimpl", "torch") else REFERENCE
    if any(f in conventions.estimated for f in d.ran()):
        return "est"
    expected = conventions.expected(d)
    if conventions.elementwise and elementwise:
        return ">=" if observed >= expected else "WRONG"
    return "ok" if observed == expected else "WRONG"


def _backward_count(backend, row: TableModel) -> int:
    """FLOPs of the backward alone: (forward + backward) - forward, by the backend's counter."""
    inputs = tuple(x.clone().requires_grad_() if x.is_floating_point() else x
                   for x in row.inputs)
    with backend.flop_counter(display=False) as counter:
        out = row.model(*inputs)
    forward = counter.get_total_flops()
    with backend.flop_counter(display=False) as counter:
        row.model(*inputs).float().sum().backward()
    del out
    return counter.get_total_flops() - forward


def measure(name: str, row: TableModel, backends: dict, timings: dict) -> list[str]:
    """The row's cells: hand counts, then one cell per counter (forward; backward)."""
    mode = torch.inference_mode() if row.inference else contextlib.nullcontext()
    with mode:
        d = derive(row.model, row.inputs)
    cells = [f"{d.total_forward() / 1e9:.4g}"]
    backward = None
    if not row.inference:
        grad_inputs = tuple(x.clone().requires_grad_() if x.is_floating_point() else x
                            for x in row.inputs)
        backward = derive(row.model, grad_inputs, backward=True).total_backward()
    cells.append("-" if backward is None else f"{backward / 1e9:.4g}")
    for counter in COUNTERS:
        backend = backends.get(counter)
        if backend is None:
            cells.append("not installed")
            continue
        start = time.perf_counter()
        try:
            with mode:
                observed = backend.model_flops(row.model, row.inputs)
            cell = f"{observed / 1e9:.4g} {verdict(counter, backend, observed, d, row.elementwise)}"
            if counter in BACKWARD_COUNTERS and backward is not None:
                got = _backward_count(backend, row)
                cell += f"; bwd {got / 1e9:.4g} {'ok' if got == backward else 'WRONG'}"
        except Exception as exc:  # a counter that raises is a cell, not a crash
            cell = f"error ({type(exc).__name__})"
        timings[counter] = timings.get(counter, 0.0) + time.perf_counter() - start
        cells.append(cell)
    return cells


def table(names: list[str]) -> str:
    backends = {}
    for counter in COUNTERS:
        with contextlib.suppress(MissingExtra):
            backends[counter] = load_backend(counter)
    header = ["model", "hand fwd", "hand bwd", *COUNTERS]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    timings: dict[str, float] = {}
    for name in names:
        torch.manual_seed(0)
        row = MODELS[name]()
        row.model.eval()
        lines.append("| " + " | ".join([name, *measure(name, row, backends, timings)]) + " |")
        print(f"  {name} done", file=sys.stderr, flush=True)
    versions = ", ".join(getattr(b, "version", n) for n, b in backends.items())
    lines += ["", f"GFLOPs (10^9). torch {torch.__version__}; {versions}.",
              "Seconds per counter, all rows: " +
              ", ".join(f"{c} {t:.1f}" for c, t in timings.items()) + "."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="MARKDOWN", help="replace the table in this file")
    parser.add_argument("--models", nargs="*", default=list(MODELS),
                        help=f"rows to run (default: all): {', '.join(MODELS)}")
    args = parser.parse_args(argv)
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"--models: {unknown} not among: {', '.join(MODELS)}")
    text = table(args.models)
    if not args.write:
        print(text)
        return 0
    with open(args.write) as f:
        doc = f.read()
    if START not in doc or END not in doc:
        parser.error(f"--write {args.write}: no {START} ... {END} markers")
    head, rest = doc.split(START, 1)
    with open(args.write, "w") as f:
        f.write(head + START + "\n" + text + "\n" + END + rest.split(END, 1)[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
