"""Issue 10 (3): torch.nn's fused inference fast paths are counted, and every op with real
arithmetic and no formula is reported (uncounted_ops), never a silent 0. Expected values are
hand derivations written here (2 FLOPs per multiply-accumulate, biases/softmax/norms free)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils import flop_counter as tfc

import refimpl
from refimpl.flops.formulas import flop_formulas
from refimpl.flops.free_ops import FREE_BY_CONVENTION, free_category

aten = torch.ops.aten
B, L, E, H, F = 2, 5, 16, 4, 32


def mha_by_hand(batch: int, lq: int, lk: int, embed: int) -> int:
    """q/k/v/out projections (2 x tokens x E x E each) + q k^T and p v over all heads."""
    projections = 2 * batch * lq * embed * embed * 2 + 2 * batch * lk * embed * embed * 2
    return projections + 2 * (2 * batch * lq * lk * embed)


def encoder_layer_by_hand(batch: int, length: int) -> int:
    return mha_by_hand(batch, length, length, E) + 2 * (2 * batch * length * E * F)


def count(counter_cls, fn, mode: str):
    ctx = {"inference": torch.inference_mode, "no_grad": torch.no_grad,
           "grad": torch.enable_grad}[mode]
    with ctx(), counter_cls(display=False) as counter:
        fn()
    return counter


def modules():
    torch.manual_seed(0)
    layer = lambda **kw: nn.TransformerEncoderLayer(E, H, F, batch_first=True, **kw)
    x = torch.randn(B, L, E)
    return {
        "MultiheadAttention": (nn.MultiheadAttention(E, H, batch_first=True),
                               lambda m: m(x, x, x), mha_by_hand(B, L, L, E)),
        "TransformerEncoderLayer": (layer(), lambda m: m(x), encoder_layer_by_hand(B, L)),
        "TransformerEncoderLayer(norm_first, gelu)": (
            layer(norm_first=True, activation="gelu"), lambda m: m(x),
            encoder_layer_by_hand(B, L)),
        "TransformerEncoder": (nn.TransformerEncoder(layer(), 2, enable_nested_tensor=False),
                               lambda m: m(x), 2 * encoder_layer_by_hand(B, L)),
        "TransformerDecoderLayer": (nn.TransformerDecoderLayer(E, H, F, batch_first=True),
                                    lambda m: m(x, x),
                                    2 * mha_by_hand(B, L, L, E) + 4 * B * L * E * F),
        "Transformer": (nn.Transformer(E, H, 1, 1, F, batch_first=True), lambda m: m(x, x),
                        encoder_layer_by_hand(B, L) + 2 * mha_by_hand(B, L, L, E)
                        + 4 * B * L * E * F),
    }


@pytest.mark.parametrize("name", list(modules()))
@pytest.mark.parametrize("mode", ["inference", "no_grad", "grad"])
def test_fused_paths_count_the_same_math(name, mode):
    module, call, by_hand = modules()[name]
    module.eval()
    counter = count(refimpl.FlopCounterMode, lambda: call(module), mode)
    assert counter.get_total_flops() == by_hand, (name, mode, counter.get_flop_counts())
    assert counter.uncounted_ops() == {}


def test_inference_mode_takes_the_fused_ops():
    mods = modules()
    seen = {}
    for name in ("MultiheadAttention", "TransformerEncoderLayer"):
        module, call, _ = mods[name]
        module.eval()
        counter = count(refimpl.FlopCounterMode, lambda m=module, c=call: c(m), "inference")
        seen[name] = set(counter.get_flop_counts()["Global"])
    assert seen == {"MultiheadAttention": {aten._native_multi_head_attention},
                    "TransformerEncoderLayer": {aten._transformer_encoder_layer_fwd}}


def test_nested_encoder_counts_each_sequence_alone():
    """With a padding mask the encoder runs on a nested tensor of the real sequences."""
    torch.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, F, batch_first=True), 2).eval()
    x = torch.randn(2, 5, E)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    counter = count(refimpl.FlopCounterMode, lambda: enc(x, src_key_padding_mask=mask),
                    "inference")
    assert counter.get_flop_counts()["Global"].keys() == {aten._transformer_encoder_layer_fwd}
    assert counter.get_total_flops() == 2 * (encoder_layer_by_hand(1, 5)
                                             + encoder_layer_by_hand(1, 3))


@pytest.mark.torch_releases("2.13", "2.14")
@pytest.mark.parametrize("name,torch_counts", [
    ("MultiheadAttention", 0),
    ("TransformerEncoderLayer", 0),
    # self-attention fused (0 of 23680); the cross-attention's projections (20480) are
    # counted but its SDPA-for-CPU (3200) is not in torch's table; feed-forward 20480
    ("TransformerDecoderLayer", 2 * B * L * E * E * 4 + 4 * B * L * E * F),
])
def test_finding_torch_counts_fused_paths_as_zero(name, torch_counts):
    """docs/findings.md, "torch FlopCounterMode: fused inference paths count 0"."""
    module, call, by_hand = modules()[name]
    counter = count(tfc.FlopCounterMode, lambda: call(module.eval()), "inference")
    assert counter.get_total_flops() == torch_counts < by_hand


@pytest.mark.torch_releases("2.13", "2.14")
def test_difference_torch_get_flop_counts_can_lack_global():
    """docs/differences.md: torch's get_flop_counts() is {} when nothing was counted (its
    flop_counts is a defaultdict, so flop_counts["Global"] works); refimpl's always has it."""
    with tfc.FlopCounterMode(display=False) as mode:
        torch.randn(3).relu()
    assert mode.get_flop_counts() == {} and mode.flop_counts["Global"] == {}


# --- uncounted ops ---------------------------------------------------------------------------

def test_uncounted_ops_are_reported_and_listed_under_the_table():
    with refimpl.FlopCounterMode(display=False) as mode:
        torch.linalg.solve(torch.randn(4, 4), torch.randn(4, 2))
        torch.fft.rfft(torch.randn(8))
        torch.fft.rfft(torch.randn(8))
        torch.mm(torch.randn(2, 2), torch.randn(2, 2))
    assert mode.uncounted_ops() == {aten._linalg_solve_ex: 1, aten._fft_r2c: 2}
    assert mode.get_total_flops() == 16
    last = mode.get_table().splitlines()[-1]
    assert last.startswith("Uncounted") and "aten._fft_r2c x2" in last
    with mode:  # a new with starts afresh
        torch.mm(torch.randn(2, 2), torch.randn(2, 2))
    assert mode.uncounted_ops() == {} and "Uncounted" not in mode.get_table()


def test_common_layers_forward_and_backward_are_counted_or_declared_free():
    net = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Upsample(scale_factor=2, mode="bilinear"), nn.Hardswish(), nn.GELU(), nn.SiLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3), nn.LayerNorm(3), nn.Dropout(),
        nn.Softmax(-1))
    with refimpl.FlopCounterMode(display=False) as mode:
        net(torch.randn(2, 3, 8, 8)).sum().backward()
        nn.Embedding(10, 4)(torch.randint(0, 10, (3,))).sum().backward()
        nn.GRU(4, 4)(torch.randn(3, 1, 4))[0].sum().backward()
    assert mode.uncounted_ops() == {}
    assert "Uncounted" not in mode.get_table()


def test_no_op_with_a_formula_is_declared_free():
    overloads = [getattr(p, o) for p in flop_formulas if hasattr(p, "overloads")
                 for o in p.overloads()]
    assert overloads and [o for o in overloads if free_category(o)] == []
    assert all(names for names in FREE_BY_CONVENTION.values())


def test_free_is_declared_not_a_default():
    assert free_category(aten.relu.default) == "elementwise"  # torch's pointwise tag
    assert free_category(aten.sum.default) == "reduction"  # torch's reduction tag
    assert free_category(aten.t.default) == "view"
    assert free_category(aten._softmax.default) == "reduction"
    assert free_category(aten._fft_r2c.default) is None  # arithmetic, no formula
    assert free_category(aten.linalg_cholesky_ex.default) is None


def test_training_step_with_flash_attention_for_cpu_matches_the_derivation():
    """On CPU with autograd the layers run SDPA's flash-for-CPU kernel, whose backward
    recomputes the scores: the derivation's attention_backward_recomputes convention."""
    from refimpl.expect.flops import Conventions, FlopDerivation, assert_flops_match

    torch.manual_seed(0)
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, F, 0.0, batch_first=True), 2,
                                  enable_nested_tensor=False)
    x = torch.randn(B, L, E, requires_grad=True)
    rules = Conventions(attention_backward_recomputes=True)
    with FlopDerivation(model, rules) as walk, refimpl.FlopCounterMode(display=False) as fwd:
        y = model(x)
    with refimpl.FlopCounterMode(display=False) as bwd:
        y.sum().backward()
    assert aten._scaled_dot_product_flash_attention_for_cpu in fwd.get_flop_counts()["Global"]
    assert_flops_match("forward", fwd, walk.result().total_forward())
    assert_flops_match("backward", bwd, walk.result().total_backward())


def test_optimizer_steps_and_in_place_variants_are_declared_free():
    model = nn.Linear(4, 4)
    model(torch.randn(2, 4)).sum().backward()
    for opt in (torch.optim.AdamW(model.parameters(), foreach=True),
                torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)):
        with refimpl.FlopCounterMode(display=False) as mode:
            opt.step()
        assert mode.uncounted_ops() == {} and mode.get_total_flops() == 0
    assert free_category(aten.masked_fill_.Scalar) == "data movement"
    assert free_category(aten._foreach_mul_.Scalar) == "elementwise"
