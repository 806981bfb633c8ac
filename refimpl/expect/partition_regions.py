"""What a plan that honours the user's checkpoint regions may save: derived without refimpl.

A program with ``torch.utils.checkpoint`` regions is traced through dynamo (which turns each
region into a tagged higher-order op) and AOTAutograd with inductor's decompositions, as a
compiled target sees it; torch marks each forward node of a region in ``meta["recompute"]``
(``must_save``, ``prefer_save``, ``must_recompute``, ``prefer_recompute``) and
``meta["ac_graph_id"]``. The user's request, read from those marks:

* a node marked ``must_save`` is never recomputed (a view: its base);
* a node marked recompute is never saved, unless it is random or mutating (it cannot be
  recomputed) or it is the boundary between two regions (a user of it is marked recompute
  in a LATER region: eager checkpointing saves a region's input, so it is saved too and
  never recomputed).

:func:`honouring` rewrites a :class:`~refimpl.expect.partition_brute.SaveProblem` with those
rules (a node never saved is not a candidate; a node never recomputed is banned), so the
brute force of that module enumerates exactly the plans that honour the regions: its
no-recompute bytes is the most any honouring plan keeps, its minimum the fewest.

Invariant: :func:`honouring` only removes plans (every plan valid for the rewritten problem
is valid for the original), so its minimum is >= the original's. Its save-everything bytes
may exceed the original's: a value the user asked to recompute may only be rebuilt from
values that cost more to keep.

The forward outputs do not count as read by the backward here (``save_problem``'s
``outputs_read=False``): a ban on a node only the outputs need would force a save the
backward never reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from refimpl.expect.partition_brute import FwdNode, SaveProblem, _drop_dead, save_problem

RECOMPUTE = ("must_recompute", "prefer_recompute")


def trace_with_regions(fn: Callable[..., Any], inputs: list[torch.Tensor]) -> SaveProblem:
    """The save problem of ``fn(*inputs)`` traced through dynamo and AOTAutograd (module
    docstring), its checkpoint marks kept. Resets dynamo (programs share a code object)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import default_partition
    from torch._inductor.compile_fx import select_decomp_table

    problems: list[SaveProblem] = []

    def capture(joint, joint_inputs, *, num_fwd_outputs, **kwargs):
        _drop_dead(joint)
        problems.append(save_problem(joint, num_fwd_outputs, outputs_read=False))
        return default_partition(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs,
                                 **kwargs)

    nop = lambda g, _: make_boxed_func(g)
    backend = aot_autograd(fw_compiler=nop, bw_compiler=nop, partition_fn=capture,
                           decompositions=select_decomp_table())
    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*inputs).backward()
    torch._dynamo.reset()
    if len(problems) != 1:
        raise AssertionError(f"expected one joint graph, traced {len(problems)}")
    return problems[0]


def boundaries(nodes: tuple[FwdNode, ...]) -> set[int]:
    """Nodes marked recompute that a node marked recompute in a later region reads."""
    found = set()
    for user in nodes:
        if user.policy not in RECOMPUTE or user.region is None:
            continue
        for i in user.inputs:
            node = nodes[i]
            if node.policy in RECOMPUTE and node.region is not None \
                    and user.region > node.region:
                found.add(i)
    return found


def honouring(problem: SaveProblem) -> SaveProblem:
    """``problem`` restricted to the plans that honour the checkpoint marks (module
    docstring)."""
    old = problem.nodes
    kept = {i for i, n in enumerate(old) if n.policy == "must_save"} | boundaries(old)
    # a view kept is its base's storage kept: the ban falls on the storage's owner
    never_recomputed = {i for i, n in enumerate(old) if n.banned} | {old[i].storage
                                                                     for i in kept}
    nodes = []
    for i, node in enumerate(old):
        never_saved = node.policy in RECOMPUTE and i not in never_recomputed
        nodes.append(dataclasses.replace(node, banned=i in never_recomputed,
                                         savable=node.savable and not never_saved))
    return dataclasses.replace(problem, nodes=tuple(nodes))


def marked(problem: SaveProblem) -> bool:
    """True if some forward node carries a checkpoint mark."""
    return any(n.policy for n in problem.nodes)
