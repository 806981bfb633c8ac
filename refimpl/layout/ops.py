"""The op table: which graph nodes may compute on channels-last tensors.

An op belongs here only if its result's *values* do not depend on its inputs' memory layout
and it accepts any dense layout. Everything else (views, reshapes, linear, losses such as
``nll_loss2d`` and its backward, random ops such as dropout, whose random stream follows
memory order) is an eager-layout consumer: it only ever sees eager strides.

Each entry is one of:

``conv``     a 2-d convolution: it is given a channels-last input and leads a region;
``pointwise`` out-of-place and layout-agnostic (batch norm, activations, pooling,
              arithmetic): its result is channels-last when one of its inputs is;
``inplace``  layout-agnostic and writes into its first argument (``relu_``, ``add_``,
              ``F.relu(x, inplace=True)``, ``F.relu(x, True)``): its result *is* its input.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Hashable
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

CONV, POINTWISE, INPLACE = "conv", "pointwise", "inplace"

_FUNCTIONS: dict[Any, str] = {
    torch.conv2d: CONV,
    F.batch_norm: POINTWISE, torch.batch_norm: POINTWISE,
    F.relu: POINTWISE, torch.relu: POINTWISE, torch.relu_: INPLACE, F.relu_: INPLACE,
    F.silu: POINTWISE, F.gelu: POINTWISE, F.hardtanh: POINTWISE, F.relu6: POINTWISE,
    torch.sigmoid: POINTWISE, torch.tanh: POINTWISE,
    F.max_pool2d: POINTWISE, torch.max_pool2d: POINTWISE, F.avg_pool2d: POINTWISE,
    F.adaptive_avg_pool2d: POINTWISE,
    operator.add: POINTWISE, operator.mul: POINTWISE, operator.sub: POINTWISE,
    torch.add: POINTWISE, torch.mul: POINTWISE, torch.sub: POINTWISE,
    operator.iadd: INPLACE, operator.imul: INPLACE,
}

_METHODS: dict[str, str] = {
    "relu": POINTWISE, "sigmoid": POINTWISE, "add": POINTWISE, "mul": POINTWISE,
    "sub": POINTWISE, "relu_": INPLACE, "add_": INPLACE, "mul_": INPLACE, "sub_": INPLACE,
}

_MODULES: dict[type, str] = {
    nn.Conv2d: CONV, nn.BatchNorm2d: POINTWISE, nn.ReLU: POINTWISE, nn.MaxPool2d: POINTWISE,
    nn.AvgPool2d: POINTWISE, nn.AdaptiveAvgPool2d: POINTWISE, nn.SiLU: POINTWISE,
}

# Activations that become in-place with ``inplace=True`` (a kwarg, or an attribute of the module).
_INPLACE_FLAG = {F.relu, F.silu, F.hardtanh, F.relu6, nn.ReLU, nn.SiLU}


def op_kind(node: fx.Node, gm: fx.GraphModule) -> str | None:
    """``conv``, ``pointwise``, ``inplace`` or None (an eager-layout consumer)."""
    if node.op == "call_function":
        kind = _FUNCTIONS.get(node.target) if isinstance(node.target, Hashable) else None
        if kind == CONV and not _input_is_positional(node):
            return None
        if kind and node.target in _INPLACE_FLAG and _inplace_argument(node):
            return INPLACE
        return kind
    if node.op == "call_method":
        return _METHODS.get(node.target)
    if node.op == "call_module":
        module = gm.get_submodule(node.target)
        kind = _MODULES.get(type(module))
        if kind and type(module) in _INPLACE_FLAG and getattr(module, "inplace", False):
            return INPLACE
        if kind == CONV and (module.padding_mode != "zeros" or not _input_is_positional(node)):
            return None
        return kind
    return None


def _input_is_positional(node: fx.Node) -> bool:
    """A conv whose input is passed by keyword (``conv(input=x)``) is not a form this pass
    rewrites: it has no first positional argument to convert."""
    return bool(node.args) and isinstance(node.args[0], fx.Node)


def conv_operands(node: fx.Node, gm: fx.GraphModule) -> tuple[Any, Any, int]:
    """(input, weight, groups) of a conv node: fx.Node or tensor for the weight."""
    if node.op == "call_module":
        module = gm.get_submodule(node.target)
        return node.args[0], module.weight, module.groups
    args = list(node.args) + [None] * 7
    groups = node.kwargs.get("groups", args[6] if args[6] is not None else 1)
    return args[0], node.kwargs.get("weight", args[1]), groups


def _inplace_argument(node: fx.Node) -> bool:
    """The ``inplace`` argument of an activation's call, by keyword or by position: dynamo
    records ``F.relu(x, True)`` and ``F.hardtanh(x, -1.0, 1.0, True)`` as written."""
    bound = inspect.signature(node.target).bind(*node.args, **node.kwargs)
    return bool(bound.arguments.get("inplace", False))
