"""``refimpl flops MODEL`` run with the backend under test's counter, against the hand count.

The command (``refimpl.flops.cli``: its argument checks, the model builders of
``refimpl.flops.models``, the count and the three formats of ``refimpl.flops.summary``) is
a user's view of a counter: a wrong figure there is a wrong figure, whichever layer made it.
Each example draws a valid invocation (:mod:`refimpl.strategies.flop_cli`: refimpl's
``mlp`` and ``transformer``, a ``torchvision:`` model of a stand-in torchvision (its model
registry alone, so the path runs whether or not torchvision is installed), or a factory
found as a user's own is, with its input shape and
dtype, on the CPU or, for a 2.2-TFLOP Linear, the meta device; a depth; forward, or a
training step's backward with or without the input's gradient; table, JSON or CSV, on
stdout or to ``--output``), runs ``cli.run`` with the backend's ``flop_counter`` and reads
the output back. Everything in it must agree with what is derived apart
(:mod:`refimpl.expect.flops_cli`): the exit status 0, the model, input and passes, each
module's row up to the depth (name, depth, FLOPs, MACs = FLOPs // 2, parameters), the op
rows (sorted, summing to the total), the totals in numbers and in human units (K, M, G, T),
the ops run without a FLOP formula with their calls, sorted by name (none but for
:class:`refimpl.strategies.flop_cli.Spectral`'s FFTs and QR; checked where the backend's
counter reports them). A few runs are made every time, as explicit examples
(:data:`refimpl.strategies.flop_cli.EXPLICIT`: resnet18, a 2.2-TFLOP Linear on the meta
device, a training step as CSV to a file, a bfloat16 backward as JSON).

A refused invocation (:data:`refimpl.strategies.flop_cli.REFUSALS`, each of them every
time, then drawn ones, among them torchvision missing or built for another torch under a
drawn torch version string, faked while the command runs) must exit 2 with one line on
stderr naming the argument, and print nothing else; where a refusal gives advice (the pip
command installing the torchvision that pairs with that torch,
:func:`refimpl.expect.flops_cli.torchvision_pip`), the line ends with it.

The human-readable figures are checked at and around every power of 1000 where their prefix
changes (:func:`refimpl.strategies.flop_cli.boundary_widths`: meta-device Linears whose
FLOPs, MACs or parameters land on the power, or on the count that rounds up to it, within 2):
999,999 is ``1 M``, never ``1e+03 K``.

Reach: the output is a table or went to a file (the paths with the most to get wrong)
for the counts; for the refusals, the refusal came from building or running the model
(past the argument checks).

Against torch (``--refimpl-target torch``, 2.13) the count fails where torch counts SDPA on
the CPU as 0 (the ``transformer`` model; docs/findings.md, FLOPs 2).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from refimpl.expect.flops_cli import (
    ExpectedReport,
    expected_report,
    human,
    torchvision_advice,
)
from refimpl.flops import cli
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.flop_cli import (
    EXPLICIT,
    POWERS,
    REFUSALS,
    Invocation,
    Refusal,
    boundary_widths,
    environment,
    has,
    invocations,
    refusals,
    rounding_edge,
    sized_invocation,
)

#: the matrix-product ops the drawn models run (forward and backward).
PRODUCT_OPS = {"aten.mm", "aten.addmm", "aten.bmm", "aten.convolution",
               "aten.convolution_backward", "aten._scaled_dot_product_flash_attention_for_cpu",
               "aten._scaled_dot_product_flash_attention_for_cpu_backward"}


class _Reporting:
    """A backend's counter, with ``uncounted_ops()`` ({}) where it has none (torch's): the
    CLI lists uncounted ops; this property checks them only where the counter reports."""

    def __init__(self, counter) -> None:
        self.counter = counter

    def __enter__(self):
        self.counter.__enter__()
        return self

    def __exit__(self, *exc):
        return self.counter.__exit__(*exc)

    def get_flop_counts(self):
        return self.counter.get_flop_counts()

    def get_total_flops(self):
        return self.counter.get_total_flops()

    def uncounted_ops(self):
        return self.counter.uncounted_ops() if hasattr(self.counter, "uncounted_ops") else {}


def run_cli(backend, argv: list[str]) -> tuple[int, str, str]:
    """``refimpl flops ARGV`` with the backend's counter: (exit status, stdout, stderr)."""
    parser = argparse.ArgumentParser(prog="refimpl flops")
    cli.add_arguments(parser)
    args = parser.parse_args(argv)
    make = component(backend, "flop_counter")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.run(args, lambda **options: _Reporting(make(**options)))
    return status, out.getvalue(), err.getvalue()


def _passes_text(call: Invocation) -> str:
    if not call.backward:
        return "forward"
    return ("forward + backward (parameter and input gradients)" if call.input_grad
            else "forward + backward (parameter gradients)")


def _expected(call: Invocation) -> tuple[ExpectedReport, str]:
    torch.manual_seed(0)
    model, x = call.build()
    x.requires_grad_(call.input_grad)
    return expected_report(model, x, call.depth, call.backward), type(model).__name__


def _check_json(call, text, want: ExpectedReport, root: str, uncounted: dict) -> None:
    data = json.loads(text)
    assert data["model"] == {"spec": call.model, "class": root, "kind": call.kind}
    assert data["inputs"] == [{"shape": [call.batch, *call.sample], "dtype": call.dtype,
                               "device": call.device}]
    assert data["passes"] == ["forward", "backward"][:1 + call.backward]
    assert data["gradients"] == (["parameters", "input"][:1 + call.input_grad]
                                 if call.backward else [])
    assert data["torch_version"] == torch.__version__
    total = want.total_flops
    assert data["total"] == {"flops": total, "macs": total // 2, "params": want.total_params,
                             "flops_human": human(total, "FLOPs")}
    rows = [{"module": r.name, "depth": r.depth, "flops": r.flops, "macs": r.flops // 2,
             "params": r.params} for r in want.rows]
    assert data["modules"] == rows
    ops = {o["op"]: o["flops"] for o in data["ops"]}
    assert all(o["macs"] == o["flops"] // 2 for o in data["ops"])
    _check_ops([o["op"] for o in data["ops"]], ops, total)
    assert data["uncounted_ops"] == uncounted


def _check_ops(names: list[str], ops: dict[str, int], total: int) -> None:
    assert names == sorted(names) and set(names) <= PRODUCT_OPS, names
    assert sum(ops.values()) == total, (ops, total)


def _check_csv(call, text, want: ExpectedReport, root: str, uncounted: dict) -> None:
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["kind", "name", "depth", "flops", "macs", "params", "calls"]
    modules = [r for r in rows[1:] if r[0] == "module"]
    assert modules == [["module", r.name, str(r.depth), str(r.flops), str(r.flops // 2),
                        str(r.params), ""] for r in want.rows]
    ops = [r for r in rows[1:] if r[0] == "op"]
    assert all(r[2] == r[5] == r[6] == "" and int(r[4]) == int(r[3]) // 2 for r in ops)
    _check_ops([r[1] for r in ops], {r[1]: int(r[3]) for r in ops}, want.total_flops)
    listed = [r for r in rows[1:] if r[0] == "uncounted_op"]
    assert listed == [["uncounted_op", op, "", "", "", "", str(n)]
                      for op, n in sorted(uncounted.items())], listed
    assert len(rows) == 1 + len(modules) + len(ops) + len(listed), "rows of another kind"


def _check_table(call, text, want: ExpectedReport, root: str, uncounted: dict) -> None:
    lines = text.split("\n")
    shape = "x".join(map(str, (call.batch, *call.sample)))
    assert lines[0] == (f"{call.model}: {_passes_text(call)}, input {shape} {call.dtype} on "
                        f"{call.device}, torch {torch.__version__}"), lines[0]
    names = ["  " * (r.depth - 1) + r.name for r in want.rows]
    width = max(len("Module"), *map(len, names))
    table = [f"{'Module':<{width}}  {'FLOPs':>16}  {'MACs':>16}  {'Params':>12}"]
    table += [f"{name:<{width}}  {r.flops:>16,}  {r.flops // 2:>16,}  {r.params:>12,}"
              for name, r in zip(names, want.rows, strict=True)]
    rows = len(want.rows)
    assert lines[1:3 + rows] == ["", *table] and lines[3 + rows] == ""
    op_lines = lines[5 + rows:-5]
    ops = {line.split()[0]: int(line.split()[1].replace(",", "")) for line in op_lines}
    op_width = max(len("Op"), *map(len, ops))
    assert lines[4 + rows] == f"{'Op':<{op_width}}  {'FLOPs':>16}", lines[4 + rows]
    assert op_lines == [f"{op:<{op_width}}  {n:>16,}" for op, n in ops.items()]
    _check_ops(list(ops), ops, want.total_flops)
    total, params = want.total_flops, want.total_params
    listed = ", ".join(f"{op} x{n}" for op, n in sorted(uncounted.items())) or "none"
    assert lines[-5:] == ["", f"uncounted ops: {listed}",
                          f"total FLOPs: {total} ({human(total, 'FLOPs')})",
                          f"total MACs: {total // 2} ({human(total // 2, 'MACs')})",
                          f"total params: {params} ({human(params, '')})"], lines[-5:]


CHECKS = {"json": _check_json, "csv": _check_csv, "table": _check_table}


def _with_examples(cases):
    """Run each of ``cases`` as an explicit example, every time, before the drawn ones."""
    def decorate(test):
        for case in reversed(cases):
            test = example(case)(test)
        return test
    return decorate


@given(invocations())
@_with_examples(EXPLICIT)
def test_flops_command_reports_the_hand_count(refimpl_backend, call: Invocation):
    """``refimpl flops`` exits 0 and its output, in the drawn format and destination, holds
    the hand count: header, module rows, op rows, totals in numbers and human units."""
    reach(call.fmt == "table" or call.to_file)
    with tempfile.TemporaryDirectory() as folder:
        output = str(Path(folder) / "flops.out") if call.to_file else None
        with environment(call.environment):
            status, out, err = run_cli(refimpl_backend, call.argv(output))
        written = Path(output).read_text() if output and Path(output).exists() else None
    assert (status, err) == (0, ""), f"{refimpl_backend.name}: {call!r}: exit {status}: {err}"
    if call.to_file:
        assert out == "" and written is not None and written.endswith("\n"), (out, written)
        text = written[:-1]
    else:
        assert out.endswith("\n"), out
        text = out[:-1]
    want, root = _expected(call)
    reports = hasattr(component(refimpl_backend, "flop_counter")(display=False), "uncounted_ops")
    try:
        CHECKS[call.fmt](call, text, want, root, call.uncounted if reports else {})
    except AssertionError as exc:
        raise AssertionError(f"{refimpl_backend.name}: refimpl flops {' '.join(call.argv(None))}"
                             f": the output differs from the hand count ({exc})\n"
                             f"expected {want}\noutput:\n{text}") from exc


@given(refusals())
@_with_examples(REFUSALS)
def test_flops_command_refuses_what_it_cannot_count(refimpl_backend, refusal: Refusal):
    """A bad argument or a model that cannot be built or run: exit 2, nothing on stdout,
    one line on stderr naming the argument."""
    reach(refusal.stage == "model")
    with environment(refusal.environment):
        status, out, err = run_cli(refimpl_backend, list(refusal.argv))
    lines = err.splitlines()
    assert (status, out) == (2, ""), (
        f"{refimpl_backend.name}: refimpl flops {' '.join(refusal.argv)}: exit {status}, "
        f"stdout {out!r}; expected exit 2 and nothing on stdout")
    assert len(lines) == 1 and lines[0].startswith(f"refimpl flops: error: {refusal.names}"), (
        f"refimpl flops {' '.join(refusal.argv)}: stderr {err!r}, expected one line naming "
        f"{refusal.names!r}")
    assert refusal.says in lines[0], f"{lines[0]!r} does not say {refusal.says!r}"
    assert lines[0].endswith(refusal.ends), f"{lines[0]!r} does not end with {refusal.ends!r}"
    if refusal.advice_for:
        says, ends = torchvision_advice(refusal.advice_for)
        assert says in lines[0] and lines[0].endswith(ends), (
            f"torch {refusal.advice_for}: {lines[0]!r} does not give the advice {says!r}")



@given(boundary_widths(), st.sampled_from(["table", "json"]))
@example(tuple(power - 1 for power in POWERS), "table")  # 999,999 params is "1 M"
def test_flops_command_prints_every_unit_boundary(refimpl_backend, widths, fmt):
    """One run per power of 1000 (K, M, G, T, 1000 T): the FLOPs, MACs and parameters of a
    model sized to land at or around it are printed in the units and digits of the hand
    rule (:func:`refimpl.expect.flops_cli.human`). Reach: a figure lies just below a power,
    where the rounding picks the prefix."""
    figures = [f for w in widths for f in (w, 2 * w)]
    reach(any(rounding_edge(p) - 2 <= f < p for f in figures for p in POWERS))
    for width in widths:
        call = sized_invocation(width, fmt)
        status, out, err = run_cli(refimpl_backend, call.argv(None))
        assert (status, err) == (0, ""), f"{refimpl_backend.name}: {call!r}: exit {status}: {err}"
        want, root = _expected(call)
        try:
            CHECKS[fmt](call, out[:-1], want, root, {})
        except AssertionError as exc:
            command = " ".join(call.argv(None))
            raise AssertionError(f"{refimpl_backend.name}: refimpl flops {command}: the "
                                 f"figures differ from the hand rule ({exc})") from exc


#: transformers' BertConfig defaults: hidden size, feed-forward size, heads
BERT_HIDDEN, BERT_FFN, BERT_HEADS = 768, 3072, 12
#: hf:bert runs: the options given (none: the documented defaults, batch 1 and 64 tokens),
#: and the batch and tokens they mean
HF_RUNS = (((), 1, 64), (("--batch-size", "2", "--seq-len", "5"), 2, 5))


def bert_flops(batch: int, seq: int, layers: int) -> int:
    """BertModel's forward by hand, on ``batch * seq`` tokens of width H: per layer the four
    H x H projections (query, key, value, output: 4 * 2 B S H^2), the feed-forward H -> F -> H
    (2 * 2 B S H F) and the attention's two products over S x S scores (2 * 2 B S^2 H, all
    heads together); then the pooler's H x H on the first token of each sample (2 B H^2)."""
    h, f = BERT_HIDDEN, BERT_FFN
    per_layer = 8 * batch * seq * h * h + 4 * batch * seq * h * f + 4 * batch * seq * seq * h
    return layers * per_layer + 2 * batch * h * h


@pytest.mark.skipif(not has("transformers"), reason="hf: models need transformers")
@given(st.sampled_from(HF_RUNS))
def test_flops_command_counts_an_hf_model_by_hand(refimpl_backend, run):
    """``refimpl flops hf:bert --layers 1``, with the batch and tokens given or left to their
    defaults (1 and 64): the input is [batch, tokens] of int64 ids, the total FLOPs and MACs
    are the hand count of :func:`bert_flops`. Reach: the defaults were used."""
    options, batch, seq = run
    reach(options == ())
    status, out, err = run_cli(refimpl_backend, ["hf:bert", "--layers", "1", "--format", "json",
                                                 *options])
    assert (status, err) == (0, ""), f"{refimpl_backend.name}: hf:bert {options}: {err}"
    report = json.loads(out)
    what = f"{refimpl_backend.name}: refimpl flops hf:bert --layers 1 {' '.join(options)}"
    assert report["inputs"] == [{"shape": [batch, seq], "dtype": "int64", "device": "cpu"}], \
        f"{what}: input {report['inputs']}, expected [{batch}, {seq}] int64 token ids"
    want = bert_flops(batch, seq, 1)
    assert (report["total"]["flops"], report["total"]["macs"]) == (want, want // 2), \
        f"{what}: total {report['total']}, the hand count is {want} FLOPs"
