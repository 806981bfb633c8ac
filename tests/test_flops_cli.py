"""``refimpl flops MODEL`` through refimpl.cli.main."""

from __future__ import annotations

import pytest

from refimpl.cli import main


def test_resnet18_default_prints_table_and_seed_total(capsys):
    assert main(["flops", "resnet18"]) == 0
    out = capsys.readouterr().out
    assert "forward + backward" in out and "ResNet.layer1" in out
    assert "total FLOPs: 10884440064" in out


def test_forward_only_depth_and_batch(capsys):
    assert main(["flops", "mlp", "--no-backward", "--batch-size", "3", "--depth", "1"]) == 0
    out = capsys.readouterr().out
    # 4 Linear(64, 64) layers on 3 rows: 4 * 2 * 3 * 64 * 64
    assert f"total FLOPs: {4 * 2 * 3 * 64 * 64}" in out
    assert "Sequential.0" not in out and "Sequential" in out


def test_transformer_counts_attention(capsys):
    assert main(["flops", "transformer"]) == 0
    assert "scaled_dot_product" in capsys.readouterr().out


@pytest.mark.parametrize("argv,match", [
    (["flops", "vgg"], "resnet18, transformer, mlp"),
    (["flops", "mlp", "--batch-size", "0"], "--batch-size"),
    (["flops", "mlp", "--depth", "-1"], "--depth"),
])
def test_bad_arguments_exit_2_naming_the_choices(argv, match, capsys):
    assert main(argv) == 2
    assert match in capsys.readouterr().err
