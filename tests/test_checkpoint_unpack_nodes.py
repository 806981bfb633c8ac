"""The saved-tensor property's graph walk: every autograd node of a loss, each once.

torch 2.10 makes a node's Python object afresh on each access, so a walk that keeps only the
ids of the nodes it has seen can meet a freed id again and stop early (it stopped at the
Linear's ``AddmmBackward0`` there, and the property then compared a graph of one saved tensor
with the checkpointed model's three).
"""

from __future__ import annotations

import torch

from refimpl.properties.test_checkpoint_unpack import _nodes


def test_walk_reaches_every_node_of_a_linear_on_a_3d_input() -> None:
    lin = torch.nn.Linear(2, 2)
    x = torch.randn(2, 1, 2, requires_grad=True)
    out = lin(x).square().sum()
    names = [node.name() for node in _nodes(out.grad_fn)]
    # loss: sum <- square <- view (3-d back) <- addmm(bias, view(x), t(weight));
    # leaves: x, weight, bias, each with its AccumulateGrad
    assert names == ["SumBackward0", "PowBackward0", "ViewBackward0", "AddmmBackward0",
                     "torch::autograd::AccumulateGrad", "ViewBackward0", "TBackward0",
                     "torch::autograd::AccumulateGrad", "torch::autograd::AccumulateGrad"]


def test_walk_visits_a_shared_node_once() -> None:
    x = torch.randn(3, requires_grad=True)
    y = x.exp()
    out = (y * y).sum()
    names = [node.name() for node in _nodes(out.grad_fn)]
    assert names == ["SumBackward0", "MulBackward0", "ExpBackward0",
                     "torch::autograd::AccumulateGrad"]
