"""Meta-tests of the FLOP properties' strategies (moved from properties/, issue 11): they
draw valid inputs, cover the features the properties need, and reach the fused paths."""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

import refimpl
from refimpl.expect.flops import tree_module_flops
from refimpl.strategies.conv import conv_configs
from refimpl.strategies.flop_programs import ARITHMETIC, arithmetic_calls
from refimpl.strategies.flop_trees import LeafSpec, ModuleTree, TreeSpec, module_trees
from refimpl.strategies.fused import FUSED_MODULES, fused_cases
from refimpl.strategies.matmul import MATMUL_OPS, MatmulCase, matmul_cases
from tests.finding import find_example


@given(conv_configs())
def test_conv_configs_are_valid(cfg):
    x, w, b = cfg.tensors()
    assert cfg.run(x, w, b).shape == cfg.output_shape
    assert min(cfg.output_size) >= 1 and cfg.in_channels % cfg.groups == 0


@pytest.mark.parametrize("feature", [
    lambda c: c.spatial_dims == 3 and c.transposed,
    lambda c: c.groups > 1 and c.in_channels == c.groups,  # depthwise
    lambda c: c.transposed and max(c.output_padding) > 0,
    lambda c: max(c.stride) == 2 and max(c.dilation) == 2 and max(c.padding) > 0,
    lambda c: c.bias and c.batch > 1 and c.spatial_dims == 1,
])
def test_conv_configs_cover(feature):
    found = find_example(conv_configs(), feature)  # find's own example budget, not the profile's
    assert feature(found)


@given(matmul_cases())
def test_matmul_cases_are_valid(case: MatmulCase):
    out = case.run(*case.args())
    assert out.numel() >= 1


@pytest.mark.parametrize("op", list(MATMUL_OPS))
def test_matmul_cases_cover_every_op(op):
    case = find_example(matmul_cases(), lambda c: c.op == op and c.k > 1)
    assert case.op == op


@pytest.mark.parametrize("kind", list(FUSED_MODULES))
def test_fused_cases_take_the_fused_path(kind):
    """Each kind, drawn at its smallest and at a larger size, runs its fused ops under
    inference_mode (the fast path's conditions hold)."""
    for case in (find_example(fused_cases(st_kind(kind)), lambda c: True),
                 find_example(fused_cases(st_kind(kind)), lambda c: c.seq > 2 and c.batch > 1)):
        module, inputs = case.build(), case.inputs()
        with torch.inference_mode(), refimpl.FlopCounterMode(display=False) as mode:
            case.run(module, inputs)
        assert set(case.fused_ops) <= set(mode.get_flop_counts()["Global"]), case


def st_kind(kind: str):
    from hypothesis import strategies as st

    return st.just(kind)


def test_fused_modules_lists_every_torch_nn_fast_path():
    """Every torch.nn module whose source takes a fused path (calls a fused op or tests a
    fast path), and every torch.nn module built from one by default, is listed."""
    fused_calls = re.compile(r"torch\._(native_multi_head_attention|transformer_encoder_layer_fwd)"
                             r"\(|why_not_sparsity_fast_path|why_not_fast_path")
    found = set()
    for path in Path(nn.modules.__file__).parent.glob("*.py"):
        text = path.read_text()
        for match in fused_calls.finditer(text):
            found |= set(re.findall(r"^class (\w+)", text[:match.start()], re.M)[-1:])
    assert found and found <= set(FUSED_MODULES), found - set(FUSED_MODULES)
    built_from = {"TransformerDecoderLayer": nn.TransformerDecoderLayer(4, 2),
                  "TransformerDecoder": nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2), 1),
                  "Transformer": nn.Transformer(4, 2, 1, 1, 8)}
    for name, module in built_from.items():
        assert any(type(m).__name__ in found for m in module.modules()), name


@pytest.mark.parametrize("name", sorted(ARITHMETIC))
def test_arithmetic_calls_reach_their_op(name):
    call = find_example(arithmetic_calls(), lambda c: c.name == name)
    with refimpl.FlopCounterMode(display=False) as mode:
        call.run()
    assert mode.uncounted_ops() == {call.op: call.times}


# ---- module trees (refimpl.strategies.flop_trees) and their hand count ---------------------

def _leaf(family, n_in, n_out, **sizes):
    return LeafSpec(family, n_in, n_out, tuple(sorted(sizes.items())))


def test_tree_hand_count_of_a_tree_written_out():
    """Block(Linear 2->3 with bias, compiled Block(mm 3->2)) on a [2, 2] input: each product
    is 2 * 2 * 2 * 3 = 24 forward; backward, the Linear forms only its weight's gradient (the
    input needs none): 24; the mm forms its weight's and its input's: 48."""
    inner = TreeSpec((_leaf("mm", 3, 2, bias=False, groups=1),), compiled=True)
    root = TreeSpec((_leaf("linear", 2, 3, bias=True, groups=1), inner))
    tree = ModuleTree(root, batch=2, width=2, modes=("forward", "backward"), input_grad=False,
                      seed=0)
    linear_only = {"Block.0": 24, "Block.0.inner": 24}
    assert tree_module_flops(tree, "forward") == {
        "Global": 48, "Block": 48, **linear_only, "Block.1": 24, "Block.1._orig_mod": 24,
        "Block.1._orig_mod.0": 24}
    assert tree_module_flops(tree, "backward") == {
        "Global": 120, "Block": 120, "Block.0": 48, "Block.0.inner": 48, "Block.1": 72,
        "Block.1._orig_mod": 72, "Block.1._orig_mod.0": 72}


@given(module_trees())
def test_module_trees_chain_their_widths_and_run(tree):
    leaves = tree.leaves()
    assert leaves[0].width_in == tree.width
    assert all(a.width_out == b.width_in for a, b in pairwise(leaves))
    model = tree.build()
    with torch.no_grad():
        out = model(tree.inputs())
    assert tuple(out.shape) == (tree.batch, leaves[-1].width_out)
    assert len(tree.modes) == 3 == len(set(tree.modes))


@pytest.mark.parametrize("op", sorted(MATMUL_OPS))
def test_a_large_case_puts_one_size_the_op_uses_past_256(op):
    """``matmul_cases(large=True)`` draws, for every op, a case with a size past 256 (CPython's
    small-int cache) among those the op multiplies, never two of them; the default never
    draws one."""
    case = find_example(matmul_cases(ops=st.just(op), large=True),
                        lambda c: max(c.multiplied) > 256)
    assert sum(size > 256 for size in (case.batch, case.m, case.k, case.n)) == 1, case

    @given(matmul_cases(ops=st.just(op)))
    def small(case):
        assert max(case.batch, case.m, case.k, case.n) <= 6, case

    small()
