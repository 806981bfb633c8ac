"""An independent derivation of a program's save-or-recompute choices: brute force.

This module shares no code with :mod:`refimpl.partition`: it traces with AOTAutograd
directly, reads the joint graph itself, prices recomputation with torch's own FLOP formulas
(:data:`FLOP_FORMULAS`: ``torch.utils.flop_counter.flop_registry``; ops without a formula
cost 0) and enumerates save-sets. It is the expectation the partition properties hold
refimpl to.

One hole of torch's table is filled: it has no entry for the CPU flash-attention kernel
that ``scaled_dot_product_attention`` dispatches to on CPU
(``_scaled_dot_product_flash_attention_for_cpu`` and its backward; docs/findings.md, "SDPA
on CPU counts 0"), so priced by the table alone recomputing attention would look free and a
plan that recomputes it would pass for one that recomputes nothing. Those two ops take
(query, key, value, ...) and (grad_out, query, key, value, ...) in ``[B, H, S, D]`` as the
CUDA flash kernel's do, so :data:`FLOP_FORMULAS` gives them torch's flash-attention
formulas; :func:`flop_counter` counts with the same table.

The model (docs/design.md, "The partitioner's problem"):
    * forward-side nodes: everything in the joint graph that does not depend on a tangent;
      the backward *reads* the forward-side inputs of backward nodes and the forward-side
      values returned as gradients;
    * a view lives in its base's storage; primals and their views cost no activation memory;
      a value saved costs its storage's bytes, each storage counted once;
    * random ops (``nondeterministic_seeded``, SDPA only with ``dropout_p != 0``) and ops
      that mutate an argument are never recomputed; tuple-valued ops cannot be saved as such;
    * a save-set ``S`` (storage-owning forward nodes) is *valid* when the walk up from what
      the backward reads, stopping at ``S`` and the primals, meets no node that may not be
      recomputed; its bytes are the storages of ``S`` that walk reaches, its cost the FLOPs
      of the nodes it recomputes.

:func:`trace_reference` is the one trace per example: it runs the program once through
AOTAutograd's default partition (which recomputes nothing), so the same call yields the
joint graph and the no-recompute reference's outputs and gradients (same decompositions,
same random stream as a dynamo-compiled target). :meth:`SaveProblem.frontier` searches
every subset of the candidates (at most :data:`MAX_CANDIDATES`; more raises
:class:`BruteForceRefused`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import fx
from torch.utils.flop_counter import FlopCounterMode, flop_registry

#: enumeration is 2**candidates walks; beyond this the derivation refuses.
MAX_CANDIDATES = 40

_aten = torch.ops.aten
#: the CPU flash-attention ops (absent from torch's table) -> torch's flash-attention op
#: whose formula has their argument layout (module docstring)
_CPU_FLASH = {"_scaled_dot_product_flash_attention_for_cpu":
              _aten._scaled_dot_product_flash_attention,
              "_scaled_dot_product_flash_attention_for_cpu_backward":
              _aten._scaled_dot_product_flash_attention_backward}
#: op overload packet -> torch's FLOP formula: torch's table, its CPU attention hole filled
FLOP_FORMULAS = {**flop_registry,
                 **{getattr(_aten, name): flop_registry[same]
                    for name, same in _CPU_FLASH.items() if hasattr(_aten, name)}}


def _raw(formula: Callable[..., int]) -> Callable[..., int]:
    """``formula`` (a table entry: it reads shapes off the values itself) marked so that
    FlopCounterMode's ``custom_mapping`` does not wrap it a second time."""
    def counted(*args: Any, **kwargs: Any) -> int:
        return formula(*args, **kwargs)

    counted._get_raw = True
    return counted


def flop_counter() -> FlopCounterMode:
    """torch's FlopCounterMode (no display) counting with :data:`FLOP_FORMULAS`."""
    extra = {op: _raw(f) for op, f in FLOP_FORMULAS.items() if op not in flop_registry}
    return FlopCounterMode(display=False, custom_mapping=extra)


class BruteForceRefused(ValueError):
    """The program has more save candidates than :data:`MAX_CANDIDATES`."""


@dataclass(frozen=True)
class FwdNode:
    """A forward-side node of the joint graph, as plain data."""

    name: str
    inputs: tuple[int, ...]  # indices of forward-side inputs
    primal: bool
    banned: bool  # random or mutating: never recomputed
    savable: bool  # False for tuple values
    storage: int  # index of the node owning its storage (itself unless a view)
    bytes: int  # bytes of the storage it owns (0 for views, primals and their views)
    flops: int  # torch's FLOP formula for the op (0 without one)
    policy: str = ""  # a checkpoint region's mark: CheckpointPolicy's name, lower case
    region: int | None = None  # the checkpoint region's id (``ac_graph_id``)
    #: a backward op that is not pointwise reads its value (directly or through views):
    #: the backward materialises it there (e.g. a gather's index, read by its scatter)
    materialised: bool = False


@dataclass(frozen=True)
class Outcome:
    """One valid save-set: its activation bytes and recompute FLOPs."""

    bytes: int
    flops: int


@dataclass(frozen=True)
class SaveProblem:
    """The forward side of one joint graph and what its backward reads."""

    nodes: tuple[FwdNode, ...]
    reads: tuple[int, ...]
    outputs: tuple[int, ...] = ()  # the forward outputs (indices of forward-side nodes)

    @property
    def candidates(self) -> list[int]:
        """Storage owners worth saving: not primals, savable, with bytes."""
        needed = self.needed
        return [i for i, n in enumerate(self.nodes)
                if not n.primal and n.savable and n.storage == i and n.bytes > 0
                and i in needed]

    @property
    def needed(self) -> set[int]:
        """Every forward-side node the backward's reads depend on."""
        return self._ancestors(self.reads)

    @property
    def forward_needed(self) -> set[int]:
        """Every forward-side node the forward outputs depend on."""
        return self._ancestors(self.outputs)

    def _ancestors(self, start) -> set[int]:
        """``start`` and every forward-side node it reads, transitively."""
        seen, stack = set(), list(start)
        while stack:
            i = stack.pop()
            if i not in seen:
                seen.add(i)
                stack.extend(self.nodes[i].inputs)
        return seen

    def evaluate(self, saved: frozenset[int]) -> Outcome | None:
        """Bytes and FLOPs of saving ``saved``; None if the backward cannot be served."""
        seen: set[int] = set()
        stack = list(self.reads)
        kept: set[int] = set()
        flops = 0
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            node = self.nodes[i]
            if node.primal:
                continue
            if i in saved:
                kept.add(node.storage)
                continue
            if node.banned:
                return None
            flops += node.flops
            stack.extend(node.inputs)
        return Outcome(sum(self.nodes[s].bytes for s in kept), flops)

    def frontier(self) -> list[Outcome]:
        """The Pareto frontier of valid save-sets: the points of :meth:`plans` that spend
        fewer FLOPs than every point with fewer bytes; sorted by bytes."""
        frontier: list[Outcome] = []
        for point in self.plans():
            if not frontier or point.flops < frontier[-1].flops:
                frontier.append(point)
        return frontier

    def plans(self) -> list[Outcome]:
        """For each bytes figure some valid save-set reaches, the fewest recompute FLOPs
        among those save-sets; sorted by bytes. Exhaustive: a search that resolves the
        pending node of highest graph index (all its users are resolved) by saving it (a
        candidate) or recomputing it (not banned), memoised on the pending set."""
        if len(self.candidates) > MAX_CANDIDATES:
            raise BruteForceRefused(f"{len(self.candidates)} save candidates > "
                                    f"MAX_CANDIDATES={MAX_CANDIDATES}")
        cands, memo = set(self.candidates), {}

        def solve(pending: frozenset[int]) -> dict[int, int]:
            if not pending:
                return {0: 0}
            if pending in memo:
                return memo[pending]
            i = max(pending)
            node, rest = self.nodes[i], pending - {i}
            best: dict[int, int] = {}
            options = []
            if node.primal:
                options.append((rest, 0, 0))
            else:
                if i in cands:
                    options.append((rest, node.bytes, 0))
                if not node.banned:
                    options.append((rest | set(node.inputs), 0, node.flops))
            for nxt, extra_bytes, extra_flops in options:
                for b, f in solve(frozenset(nxt)).items():
                    key = b + extra_bytes
                    best[key] = min(best.get(key, f + extra_flops), f + extra_flops)
            memo[pending] = best
            return best

        return [Outcome(b, f) for b, f in sorted(solve(frozenset(self.reads)).items())]

    def save_forward_work(self) -> Outcome:
        """Save every candidate the forward outputs need, every banned one, and every
        element of a tuple-valued op they need (SDPA's logsumexp: recomputing it would
        rerun the op); recompute the rest: a plan that repeats no forward work, since what
        the forward outputs do not need runs once in any plan (in the backward here). Its
        bytes bound a runtime-optimised plan that bans only forward work from recompute."""
        forward = self.forward_needed
        tuples = {i for i in forward if not self.nodes[i].savable}
        keep = [i for i in self.candidates if i in forward or self.nodes[i].banned
                or tuples.intersection(self.nodes[i].inputs)]
        outcome = self.evaluate(frozenset(keep))
        assert outcome is not None  # nothing banned is left to recompute
        return outcome

    def runtime_optimised(self) -> Outcome:
        """The fewest bytes among the plans that recompute the fewest FLOPs, when every
        value the forward outputs need and the backward materialises (``materialised``) is
        kept too: torch's budget-1.0 rule bans those from recompute, since the backward op
        reads them from memory either way (recomputing them spares no traffic). Views are
        never banned; their base is."""
        forward = self.forward_needed
        kept = tuple(replace(n, banned=True) if n.materialised and i in forward
                     and n.storage == i and not n.primal else n
                     for i, n in enumerate(self.nodes))
        return SaveProblem(kept, self.reads, self.outputs).frontier()[-1]

    def save_everything(self) -> Outcome:
        """Save every candidate: nothing recomputed (what the backward reads, kept)."""
        outcome = self.evaluate(frozenset(self.candidates))
        assert outcome is not None  # every storage the backward reads is kept
        return outcome


def _is_view(node: fx.Node) -> bool:
    target = node.target
    if target is operator.getitem:
        source = node.args[0]
        return isinstance(source, fx.Node) and _is_view(source)
    if not isinstance(target, torch._ops.OpOverload):
        return False
    return any(r.alias_info is not None and not r.alias_info.is_write
               for r in target._schema.returns)


def _banned(node: fx.Node) -> bool:
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if target._schema.is_mutable:
        return True
    if torch.Tag.nondeterministic_seeded not in target.tags:
        return False
    names = [a.name for a in target._schema.arguments]
    if "dropout_p" in names:
        k = names.index("dropout_p")
        p = node.args[k] if k < len(node.args) else node.kwargs.get("dropout_p", 0.0)
        return p != 0
    return True


def _materialised(node: fx.Node, backward: set[fx.Node]) -> bool:
    """Whether a backward op that is not pointwise reads ``node``'s value, directly or
    through views (a view passes its base's value on; the walk goes through it)."""
    stack, seen = list(node.users), set()
    while stack:
        user = stack.pop()
        if user in seen or user.op != "call_function":
            continue
        seen.add(user)
        if _is_view(user):
            stack.extend(user.users)
        elif user in backward and not (isinstance(user.target, torch._ops.OpOverload)
                                       and torch.Tag.pointwise in user.target.tags):
            return True
    return False


def _flops(node: fx.Node) -> int:
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return 0
    formula = FLOP_FORMULAS.get(target.overloadpacket)
    if formula is None:
        return 0
    val = lambda a: a.meta["val"] if isinstance(a, fx.Node) else a
    args, kwargs = torch.utils._pytree.tree_map(val, (node.args, node.kwargs))
    return int(formula(*args, **kwargs, out_val=node.meta["val"]))


def _policy(node: fx.Node) -> str:
    """The checkpoint mark torch put on ``node`` (``meta["recompute"]``), lower case."""
    mark = node.meta.get("recompute")
    return "" if mark is None else mark.name.lower()


def _nbytes(val: Any) -> int:
    if not isinstance(val, torch.Tensor):
        return 0
    return val.untyped_storage().nbytes()


def save_problem(gm: fx.GraphModule, num_fwd_outputs: int,
                 outputs_read: bool = True) -> SaveProblem:
    """The forward side of an AOTAutograd joint graph (module docstring). With
    ``outputs_read`` (the default, as the plain properties were calibrated) the forward
    outputs count as read by the backward, since the joint graph's output node depends on
    the tangents; this costs plans recompute FLOPs, never bytes. Without it only the
    backward's real reads and the gradients count (a ban on a node the outputs need would
    otherwise force a save the backward does not need)."""
    backward: set[fx.Node] = set()
    for node in gm.graph.nodes:
        tangent = node.op == "placeholder" and "tangents" in str(node.target)
        if tangent or any(i in backward for i in node.all_input_nodes):
            backward.add(node)
    fwd = [n for n in gm.graph.nodes if n.op in ("placeholder", "call_function")
           and n not in backward]
    index = {n: i for i, n in enumerate(fwd)}
    nodes: list[FwdNode] = []
    for i, n in enumerate(fwd):
        view = _is_view(n) and isinstance(n.args[0], fx.Node)
        base = index[n.args[0]] if view else i
        primal = n.op == "placeholder"
        storage = nodes[base].storage if view else i
        input_alias = primal or (view and nodes[base].bytes == 0 and
                                 nodes[nodes[base].storage].primal)
        nodes.append(FwdNode(
            name=n.name, inputs=tuple(index[a] for a in n.all_input_nodes),
            primal=primal, banned=_banned(n), savable=isinstance(n.meta.get("val"),
                                                                 torch.Tensor),
            storage=storage, bytes=0 if (view or input_alias) else _nbytes(n.meta.get("val")),
            flops=0 if primal else _flops(n), policy=_policy(n),
            region=n.meta.get("ac_graph_id"),
            materialised=not view and not primal and _materialised(n, backward)))
    output = next(iter(gm.graph.find_nodes(op="output")))
    grads = torch.utils._pytree.tree_leaves(output.args)[num_fwd_outputs:]
    reads = [index[i] for n in backward for i in n.all_input_nodes
             if i in index and (outputs_read or n.op != "output")]
    reads += [index[g] for g in grads if isinstance(g, fx.Node) and g in index]
    outputs = [index[o] for o in torch.utils._pytree.tree_leaves(output.args)[:num_fwd_outputs]
               if isinstance(o, fx.Node) and o in index]
    return SaveProblem(tuple(nodes), tuple(dict.fromkeys(reads)), tuple(outputs))


def _drop_dead(gm: fx.GraphModule) -> None:
    """Erase unused nodes that neither draw random numbers nor mutate (fx's own dead-code
    pass keeps SDPA, tagged random for its optional dropout, whose tuple trips
    ``default_partition``); random draws stay, so the random stream is the target's. The
    module is not recompiled: the caller does that when it runs the graph."""
    for node in reversed(list(gm.graph.nodes)):
        if node.op == "call_function" and not node.users and not _banned(node):
            gm.graph.erase_node(node)


@dataclass(frozen=True)
class ReferenceRun:
    """The one trace of an example: the joint graph's save problem, and the outputs and
    input gradients of the no-recompute reference run."""

    problem: SaveProblem
    output: torch.Tensor
    grads: list
    #: FLOPs of the no-recompute backward, by :func:`flop_counter`: what a plan's backward
    #: runs beyond it is what the plan recomputes
    backward_flops: int = 0
    #: the same save problem with only the backward's real reads (``outputs_read=False``):
    #: the same bytes for every save-set, recompute FLOPs as a plan really spends them
    backward_problem: SaveProblem | None = None


def trace_reference(fn: Callable[..., Any], inputs: list[torch.Tensor],
                    seed: int = 0) -> ReferenceRun:
    """Run ``fn(*inputs)`` (forward and backward, RNG seeded with ``seed``) through
    AOTAutograd with inductor's decompositions and the default partition, capturing the
    joint graph, and count the backward's FLOPs. ``inputs`` get their ``.grad`` set."""
    # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
    from functorch.compile import aot_function, make_boxed_func
    from torch._functorch.partitioners import default_partition
    from torch._inductor.compile_fx import select_decomp_table

    problems: list[SaveProblem] = []

    def capture(joint, joint_inputs, *, num_fwd_outputs, **kwargs):
        _drop_dead(joint)
        problems.append(save_problem(joint, num_fwd_outputs))
        problems.append(save_problem(joint, num_fwd_outputs, outputs_read=False))
        return default_partition(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs,
                                 **kwargs)

    def backward_without_dead_ops(graph: fx.GraphModule, _) -> Callable[..., Any]:
        # default_partition leaves a dead copy of a forward SDPA in the backward (its
        # dead-code pass keeps ops tagged random): it would count as a recompute
        _drop_dead(graph)
        graph.recompile()
        return make_boxed_func(graph)

    nop = lambda g, _: make_boxed_func(g)
    compiled = aot_function(fn, fw_compiler=nop, bw_compiler=backward_without_dead_ops,
                            partition_fn=capture,
                            decompositions=select_decomp_table())
    torch.manual_seed(seed)
    out = compiled(*inputs)
    with flop_counter() as counter:
        out.backward()
    return ReferenceRun(problems[0], out.detach(), [x.grad for x in inputs],
                        counter.get_total_flops(), problems[1])
