"""``refimpl flops MODEL`` through refimpl.cli.main."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from refimpl.cli import main
from refimpl.flops.models import torchvision_advice
from refimpl.flops.summary import human


def make_mlp():
    """A user's factory, as ``refimpl flops tests.test_flops_cli:make_mlp`` loads it."""
    return torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))


NOT_A_MODULE = 3


def test_resnet18_default_is_the_forward_with_units(capsys):
    """The default changed from forward + backward to forward only (as the peers count)."""
    assert main(["flops", "resnet18"]) == 0
    out = capsys.readouterr().out
    assert "resnet18: forward," in out and "ResNet.layer1" in out
    # the seed's forward + backward total is 10884440064 = 3 x the forward
    assert "total FLOPs: 3628146688 (3.63 GFLOPs)" in out
    assert "total MACs: 1814073344 (1.81 GMACs)" in out


#: resnet18's first convolution, 3 -> 64 channels, 7x7, on a 112x112 output: the FLOPs of
#: the gradient of its input (2 per multiply-accumulate), which a training step never computes.
CONV1_INPUT_GRAD = 2 * 64 * 3 * 7 * 7 * 112 * 112


def test_resnet18_backward_counts_a_training_step(capsys):
    """--backward differentiates the parameters only: the forward's 3x less the image's
    gradient through conv1 (the seed's 10884440064 makes the input require grad)."""
    assert main(["flops", "resnet18", "--backward"]) == 0
    out = capsys.readouterr().out
    assert "forward + backward (parameter gradients)" in out
    assert f"total FLOPs: {10884440064 - CONV1_INPUT_GRAD} " in out


def test_resnet18_input_grad_adds_the_images_gradient(capsys):
    assert main(["flops", "resnet18", "--backward", "--input-grad"]) == 0
    out = capsys.readouterr().out
    assert "forward + backward (parameter and input gradients)" in out
    assert "total FLOPs: 10884440064 " in out


def test_users_factory_with_input_shape(capsys):
    argv = ["flops", "tests.test_flops_cli:make_mlp", "--input-shape", "4,32", "--format",
            "json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == {"spec": "tests.test_flops_cli:make_mlp", "class": "Sequential",
                             "kind": "factory"}
    assert data["inputs"] == [{"shape": [4, 32], "dtype": "float32", "device": "cpu"}]
    assert data["passes"] == ["forward"] and data["torch_version"] == torch.__version__
    assert data["total"]["flops"] == 2 * 4 * (32 * 16 + 16 * 8)
    assert data["ops"] == [{"op": "aten.addmm", "flops": 2 * 4 * (32 * 16 + 16 * 8),
                            "macs": 4 * (32 * 16 + 16 * 8)}]


def test_users_factory_in_float64_prints_units(capsys):
    argv = ["flops", "tests.test_flops_cli:make_mlp", "--input-shape", "1000,32",
            "--dtype", "float64"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    flops = 2 * 1000 * (32 * 16 + 16 * 8)
    assert "input 1000x32 float64 on cpu" in out
    assert f"total FLOPs: {flops} (1.28 MFLOPs)" in out


@pytest.mark.parametrize("argv,match", [
    (["flops", "tests.test_flops_cli:make_mlp"], "--input-shape: required"),
    (["flops", "tests.test_flops_cli:make_mlp", "--input-shape", "4,x"], "'x' is not an int"),
    (["flops", "tests.test_flops_cli:make_mlp", "--input-shape", "4,0"], "'0' is not an int"),
    (["flops", "mlp", "--input-shape", "4,64"], "only for module:factory"),
    (["flops", "tests.test_flops_cli:make_mlp", "--input-shape", "4,32", "--dtype", "int8"],
     "--dtype='int8'"),
    (["flops", "tests.test_flops_cli:missing", "--input-shape", "4,32"],
     "cannot load it (AttributeError: module 'tests.test_flops_cli' has no attribute"),
    (["flops", "no_such_pkg.mod:make", "--input-shape", "4,32"],
     "cannot load it (ModuleNotFoundError: No module named 'no_such_pkg')"),
    (["flops", "tests.test_flops_cli:NOT_A_MODULE", "--input-shape", "4"], "nn.Module"),
    (["flops", "mlp", "--device", "nonsense"], "--device='nonsense'"),
])
def test_factory_arguments_exit_2_naming_the_problem(argv, match, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("version,expected", [
    ("2.13.0+cpu", "pip install --no-deps 'torchvision==0.28.*' "
                   "--index-url https://download.pytorch.org/whl/cpu"),
    ("2.14.1", "pip install --no-deps 'torchvision==0.29.*'"),
])
def test_torchvision_advice_keeps_torch(version, expected):
    advice = torchvision_advice(version)
    assert advice.endswith(expected)
    assert "pip install torchvision" not in advice  # the command that replaces torch


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
    (["flops", "vgg"], "resnet18, transformer, mlp, torchvision:NAME, hf:NAME, module:factory"),
    (["flops", "mlp", "--batch-size", "0"], "--batch-size"),
    (["flops", "mlp", "--depth", "-1"], "--depth"),
])
def test_bad_arguments_exit_2_naming_the_choices(argv, match, capsys):
    assert main(argv) == 2
    assert match in capsys.readouterr().err


# --- what the FLOP peers offer: MACs and params per module, export, uncounted ops, zoo ----

def test_table_has_macs_and_params_per_module(capsys):
    assert main(["flops", "mlp", "--no-backward", "--depth", "2"]) == 0
    out = capsys.readouterr().out
    assert "MACs" in out and "Params" in out and "uncounted ops: none" in out
    # Sequential.0 is Linear(64, 64) on one row: 8192 FLOPs, 4096 MACs, 64*64+64 params
    assert any(line.split() == ["Sequential.0", "8,192", "4,096", "4,160"]
               for line in out.splitlines())


def test_json_export(capsys):
    import json

    assert main(["flops", "mlp", "--no-backward", "--format", "json", "--depth", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    root = data["modules"][0]
    assert root["module"] == "Sequential" and root["flops"] == 4 * 2 * 64 * 64
    assert root["macs"] == root["flops"] // 2 and root["params"] == 4 * (64 * 64 + 64)
    assert data["uncounted_ops"] == {}


def test_csv_export_to_file(tmp_path, capsys):
    import csv

    path = tmp_path / "flops.csv"
    assert main(["flops", "mlp", "--backward", "--format", "csv", "--output", str(path)]) == 0
    assert capsys.readouterr().out == ""
    rows = list(csv.DictReader(path.open()))
    assert rows[0]["kind"] == "module" and rows[0]["name"] == "Sequential"
    # forward + backward (2x), less the first layer's input gradient (a training step)
    training_step = 3 * 4 * 2 * 64 * 64 - 2 * 64 * 64
    assert int(rows[0]["flops"]) == training_step
    ops = {r["name"]: int(r["flops"]) for r in rows if r["kind"] == "op"}
    assert sum(ops.values()) == training_step and "aten.addmm" in ops


def test_uncounted_ops_are_listed(monkeypatch, capsys):
    import json

    import torch

    from refimpl.flops.models import SAMPLE_SHAPES
    from refimpl.models import MODELS

    class Fft(torch.nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs()

    monkeypatch.setitem(MODELS, "fft", Fft)
    monkeypatch.setitem(SAMPLE_SHAPES, "fft", (16,))
    assert main(["flops", "fft", "--no-backward", "--format", "json"]) == 0
    assert any("fft" in op for op in json.loads(capsys.readouterr().out)["uncounted_ops"])


def test_hf_model_from_its_config(capsys):
    pytest.importorskip("transformers")
    assert main(["flops", "hf:gpt2", "--layers", "1", "--seq-len", "4", "--no-backward",
                 "--format", "json", "--depth", "2"]) == 0
    import json

    modules = {m["module"]: m for m in json.loads(capsys.readouterr().out)["modules"]}
    # lm_head: 4 tokens x 768 x 50257 vocabulary, one MAC each
    assert modules["GPT2LMHeadModel.lm_head"]["macs"] == 4 * 768 * 50257


def test_torchvision_model_by_name(capsys):
    pytest.importorskip("torchvision")
    assert main(["flops", "torchvision:resnet18", "--no-backward"]) == 0
    assert "total FLOPs: 3628146688" in capsys.readouterr().out


@pytest.mark.parametrize("model,package,hint", [
    ("torchvision:resnet50", "torchvision", "pip install --no-deps 'torchvision==0."),
    ("hf:gpt2", "transformers", "refimpl[transformers]"),
])
def test_missing_package_exits_2_naming_it(monkeypatch, capsys, model, package, hint):
    monkeypatch.setitem(sys.modules, package, None)  # import raises ImportError
    assert main(["flops", model]) == 2
    err = capsys.readouterr().err
    assert package in err and hint in err


@pytest.mark.parametrize("argv,match", [
    (["flops", "mlp", "--format", "xml"], "table, json, csv"),
    (["flops", "hf:not-a-model-type"], "not a transformers model type"),
    (["flops", "mlp", "--seq-len", "0"], "--seq-len"),
    (["flops", "mlp", "--layers", "0"], "--layers"),
])
def test_more_bad_arguments_exit_2(argv, match, capsys):
    if argv[1].startswith("hf:"):
        pytest.importorskip("transformers")
    assert main(argv) == 2
    assert match in capsys.readouterr().err


# --- the user's own model, from the current folder; the table's alignment -----------------

CONV_MODELS = """
from torch import nn


def factory():
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 30 * 30, 10))
"""


def test_a_factory_in_the_current_folder_is_found(tmp_path, monkeypatch, capsys):
    """`refimpl flops mymodels:factory` where mymodels.py is, as `refimpl fuzz --target`."""
    (tmp_path / "mymodels.py").write_text(CONV_MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "mymodels", raising=False)
    argv = ["flops", "mymodels:factory", "--input-shape", "1,3,32,32", "--backward",
            "--format", "json"]
    assert main(argv) == 0, capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    ops = {row["op"]: row["flops"] for row in data["ops"]}
    # 8 output channels x 3 inputs x 3x3 kernel x 30x30 positions, 2 FLOPs per MAC
    conv = 2 * 8 * 3 * 3 * 3 * 30 * 30
    assert ops["aten.convolution"] == conv == 388_800
    assert ops["aten.convolution_backward"] == conv  # the weight's gradient only
    assert data["gradients"] == ["parameters"]


def test_input_grad_adds_the_inputs_gradient(tmp_path, monkeypatch, capsys):
    (tmp_path / "mymodels.py").write_text(CONV_MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "mymodels", raising=False)
    argv = ["flops", "mymodels:factory", "--input-shape", "1,3,32,32", "--backward",
            "--input-grad", "--format", "json"]
    assert main(argv) == 0, capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    ops = {row["op"]: row["flops"] for row in data["ops"]}
    assert ops["aten.convolution_backward"] == 2 * 388_800  # the weight's and the input's
    assert data["gradients"] == ["parameters", "input"]


def test_the_op_table_fits_its_longest_op_name(tmp_path, monkeypatch, capsys):
    """Op names longer than every module name: each FLOPs column still ends in one place."""
    (tmp_path / "mymodels.py").write_text(CONV_MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "mymodels", raising=False)
    argv = ["flops", "mymodels:factory", "--input-shape", "1,3,32,32", "--backward",
            "--depth", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    op_table = out.split("\n\n")[2].splitlines()
    assert op_table[0].split() == ["Op", "FLOPs"]
    assert len({len(line) for line in op_table}) == 1, op_table
    assert any(len(line.split()[0]) > len("Sequential") for line in op_table[1:])


def test_backward_help_says_which_gradients(capsys):
    with pytest.raises(SystemExit):
        main(["flops", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "the gradients of the parameters only" in help_text
    assert "--input-grad" in help_text and "count the input's gradient too" in help_text


@pytest.mark.parametrize("count,text", [
    (0, "0 FLOPs"), (999, "999 FLOPs"), (1000, "1 KFLOPs"), (1234, "1.23 KFLOPs"),
    (999_499, "999 KFLOPs"), (999_500, "1 MFLOPs"), (999_999, "1 MFLOPs"),
    (10**6, "1 MFLOPs"), (999_499_999, "999 MFLOPs"), (999_999_999, "1 GFLOPs"),
    (1_819_066_368, "1.82 GFLOPs"), (999_999_999_999, "1 TFLOPs"),
    (999_499 * 10**9, "999 TFLOPs"), (999_999_999_999_999, "1,000 TFLOPs"),
    (12_345 * 10**12, "12,345 TFLOPs"),
])
def test_human_figures_at_unit_boundaries(count, text):
    """The prefix follows the rounded figure: 999,999 is 1 M, never "1e+03 K"."""
    assert human(count, "FLOPs") == text
