"""FlopCounterMode: count the FLOPs of everything run inside a ``with`` block, per module.

Algorithm. Entering installs a TorchDispatchMode, so every aten op reaches
``__torch_dispatch__`` with its real arguments (after autograd: the backward's ops arrive
too). For each op:

1. an op with no formula in the table that has a CompositeImplicit decomposition is
   decomposed (under the mode), so its parts are counted;
2. otherwise it runs, and if its packet has a formula, ``formula(*args, out_val=out,
   **kwargs)`` FLOPs are added to the op's entry of ``Global`` and of every module that the
   :class:`ModuleTracker` reports as running (forward or backward); an op with no formula
   that is not declared free (:mod:`refimpl.flops.free_ops`) is recorded as *uncounted*
   (``uncounted_ops()``, a line under the table): never a silent 0;
3. an op on a strided-layout nested tensor (what a jagged tensor's attention computes with
   on the CPU) is run as it is, never decomposed; a nested ``matmul``/``bmm`` counts as the
   products of its components (each pair run again, on meta copies, under the mode);
4. ``torch.cond`` runs both branches, counted apart, and adds the larger count per
   (module, op): an upper bound; its result is the branch the predicate selects;
5. ``torch.while_loop`` runs its condition and body under the mode, iteration by
   iteration, so each iteration's ops are counted; any other higher-order op runs with the
   mode off (its inner ops unseen) and is counted by its formula, or listed as uncounted.

Invariants: ``flop_counts["Global"]`` holds every counted FLOP exactly once, and a module's
entry is the part that ran while it was active; every op that ran is counted, declared free
or listed by ``uncounted_ops()``; counts restart at each ``with``; on exit
the mode and the module hooks are removed, also when the block raised.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Literal

import torch
from torch._ops import HigherOrderOperator, OpOverload
from torch.utils._python_dispatch import TorchDispatchMode

from refimpl.flops.formulas import as_table_entry, checked_count, flop_formulas, packet_of
from refimpl.flops.formulas.registry import check_target, present
from refimpl.flops.free_ops import is_free
from refimpl.flops.module_tracker import GLOBAL, ModuleTracker
from refimpl.flops.table import render, uncounted_line

_aten = torch.ops.aten
#: metadata queries that tensor subclasses with their own sizes and strides (a jagged nested
#: tensor) answer themselves: never counted or run here. Run under the mode, such a query
#: would ask the subclass, which asks the mode again: endless recursion. ``sym_is_contiguous``
#: is the query torch >= 2.9 asks for contiguity (``present``: each name this torch has).
_METADATA_OPS = frozenset({
    _aten.is_contiguous.default, _aten.is_contiguous.memory_format,
    _aten.is_strides_like_format.default, _aten.is_non_overlapping_and_dense.default,
    _aten.size.default, _aten.sym_size.default, _aten.stride.default,
    _aten.sym_stride.default, _aten.storage_offset.default, _aten.sym_storage_offset.default,
    _aten.numel.default, _aten.sym_numel.default, _aten.dim.default,
    *(packet.default for packet in present(_aten, "sym_is_contiguous")),
    torch.ops.prim.layout.default})


def _on_nested(args: tuple) -> bool:
    """Whether a strided-layout nested tensor (the kind a jagged tensor's attention makes
    on the CPU) is among ``args``."""
    return any(isinstance(a, torch.Tensor) and a.is_nested and a.layout == torch.strided
               for a in args)


def _component_pairs(a: torch.Tensor, b: torch.Tensor) -> list[tuple[torch.Tensor, ...]]:
    """The operand pairs of a nested product, component by component (torch multiplies
    nested tensors only with nested tensors of as many components)."""
    return list(zip(a.unbind(), b.unbind(), strict=True))


def _check_depth(where: str, depth: Any) -> None:
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool)
                              or depth < 0):
        raise ValueError(f"{where}(depth=...): expected None or an int >= 0, got {depth!r}")


def _check_options(depth: Any, display: Any, custom_mapping: Any) -> None:
    _check_depth("FlopCounterMode", depth)
    if not isinstance(display, bool):
        raise ValueError(f"FlopCounterMode(display=...): expected True or False, "
                         f"got {display!r}")
    if custom_mapping is not None and not isinstance(custom_mapping, dict):
        raise ValueError(f"FlopCounterMode(custom_mapping=...): expected a dict "
                         f"{{op packet: formula}} or None, got {type(custom_mapping).__name__}")


class FlopCounterMode:
    """Drop-in for ``torch.utils.flop_counter.FlopCounterMode``.

    ``mods`` is accepted for compatibility and ignored (a warning says it is not needed):
    modules are tracked by global hooks. ``depth`` bounds the printed table (None: all),
    ``display`` prints it on exit, ``custom_mapping`` ({packet: formula}) adds or replaces
    formulas; a formula with attribute ``_get_raw = True`` gets values, else shapes.
    """

    def __init__(self, mods: torch.nn.Module | list[torch.nn.Module] | None = None,
                 depth: int | None = 2, display: bool = True,
                 custom_mapping: dict[Any, Any] | None = None) -> None:
        _check_options(depth, display, custom_mapping)
        if mods is not None:
            warnings.warn("mods argument is not needed anymore, you can stop passing it",
                          UserWarning, stacklevel=2)
        self.depth = depth
        self.display = display
        self.flop_counts: defaultdict[str, defaultdict[Any, int]] = \
            defaultdict(lambda: defaultdict(int))
        self._uncounted: defaultdict[Any, int] = defaultdict(int)
        self.flop_registry = dict(flop_formulas)
        for target, formula in (custom_mapping or {}).items():
            check_target(target, "FlopCounterMode(custom_mapping=...) keys")
            self.flop_registry[target] = as_table_entry(formula)
        self.mod_tracker = ModuleTracker()
        self._mode: _CountingMode | None = None

    def get_total_flops(self) -> int:
        """All FLOPs counted in the last (or current) ``with``."""
        return sum(self.flop_counts.get(GLOBAL, {}).values())

    def get_flop_counts(self) -> dict[str, dict[Any, int]]:
        """{module name: {op packet: FLOPs}}, as plain dicts; always has "Global" (as torch)."""
        counts = {name: dict(ops) for name, ops in self.flop_counts.items()}
        counts.setdefault(GLOBAL, {})
        return counts

    def uncounted_ops(self) -> dict[Any, int]:
        """{op packet: times seen} for the ops of the last (or current) ``with`` that have no
        formula and are not declared free (:mod:`refimpl.flops.free_ops`): real arithmetic
        that the total leaves out. Empty when every op was counted or free."""
        return dict(self._uncounted)

    def get_table(self, depth: int | None = None) -> str:
        """The per-module table, modules up to ``depth`` (default: the constructor's), and a
        line naming the uncounted ops when there are any."""
        _check_depth("get_table", depth)
        depth = self.depth if depth is None else depth
        table = render(self.get_flop_counts(), 10**9 if depth is None else depth)
        line = uncounted_line(self.uncounted_ops())
        return table if not line else f"{table}\n{line}"

    def __enter__(self) -> FlopCounterMode:
        if self._mode is not None:
            raise RuntimeError("FlopCounterMode is not re-entrant: this one is already active")
        self.flop_counts.clear()
        self._uncounted.clear()
        self.mod_tracker.__enter__()
        try:
            self._mode = _CountingMode(self)
            self._mode.__enter__()
        except BaseException:
            self._mode = None
            self.mod_tracker.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc_info: Any) -> Literal[False]:
        mode, self._mode = self._mode, None
        try:
            if mode is not None:
                mode.__exit__(*exc_info)
        finally:
            self.mod_tracker.__exit__(*exc_info)
        if self.display:
            print(self.get_table(self.depth))
        return False

    def _count_apart(self, fn: Any) -> tuple[Any, Mapping[str, Mapping[Any, int]]]:
        """Run ``fn`` with fresh counts; return its result and the counts it made."""
        saved = self.flop_counts
        self.flop_counts = defaultdict(lambda: defaultdict(int))
        try:
            out = fn()
        finally:
            delta, self.flop_counts = self.flop_counts, saved
        return out, delta

    def _add_upper_bound(self, deltas: list[Mapping[str, Mapping[Any, int]]]) -> None:
        """Add, per (module, op), the largest of the alternatives' counts."""
        for name in set().union(*deltas):
            per_op = [d.get(name, {}) for d in deltas]
            for op in set().union(*per_op):
                self.flop_counts[name][op] += max(ops.get(op, 0) for ops in per_op)

    def _record(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        packet = packet_of(func)
        formula = self.flop_registry.get(packet)
        if formula is None:
            if not is_free(func):
                self._uncounted[packet] += 1
            return
        flops = checked_count(func, formula(*args, out_val=out, **kwargs))
        for name in self.mod_tracker.parents:
            self.flop_counts[name][packet] += flops


class _CountingMode(TorchDispatchMode):
    """The dispatch mode behind FlopCounterMode (see the module docstring)."""

    supports_higher_order_operators = True

    def __init__(self, counter: FlopCounterMode) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _METADATA_OPS:
            return NotImplemented
        if func is torch.ops.higher_order.cond:
            return self._cond(*args)
        if _on_nested(args):
            return self._nested(func, args, kwargs)
        if func is torch.ops.higher_order.while_loop:
            return self._while_loop(*args, **kwargs)
        if isinstance(func, HigherOrderOperator):
            out = func(*args, **kwargs)  # the mode is off here: its inner ops go unseen
            self.counter._record(func, args, kwargs, out)
            return out
        if (isinstance(func, OpOverload) and func.overloadpacket not in
                self.counter.flop_registry and func is not torch.ops.prim.device.default):
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        out = func(*args, **kwargs)
        self.counter._record(func, args, kwargs, out)
        return out

    def _nested(self, func, args, kwargs):
        """An op on strided nested tensors runs as is (torch's decompositions read sizes that
        a ragged tensor does not have); a nested ``matmul`` or ``bmm`` is its components'
        products, counted by running each pair again on shape-only (meta) copies under the
        mode."""
        out = func(*args, **kwargs)
        if packet_of(func) not in (_aten.matmul, _aten.bmm):
            self.counter._record(func, args, kwargs, out)
            return out
        with self:
            for a, b in _component_pairs(*args[:2]):
                torch.matmul(a.to("meta"), b.to("meta"))
        return out

    def _cond(self, pred, true_fn, false_fn, operands):
        """torch.cond: both branches run, each counted apart; the count is the per-(module,
        op) maximum of the two (an upper bound, whichever branch a later call takes) and the
        result is the branch that ``pred`` selects."""
        branches = []
        for branch in (true_fn, false_fn):
            def run(branch=branch):
                with self:
                    return branch(*operands)

            branches.append(self.counter._count_apart(run))
        self.counter._add_upper_bound([delta for _, delta in branches])
        return branches[0][0] if bool(pred) else branches[1][0]

    def _while_loop(self, cond_fn, body_fn, carried_inputs, additional_inputs):
        """torch.while_loop, by its documented meaning ``while cond_fn(*carried, *extra):
        carried = body_fn(*carried, *extra)``, each call run under the mode: every iteration's
        ops are counted (the count of this call: the iterations depend on the data, so no
        bound holds for another call). Returns the last carried values, copies where the body
        never ran (as torch's eager loop does: an output never aliases an input)."""
        carried = tuple(carried_inputs)
        with self:
            pred = cond_fn(*carried, *additional_inputs)
        if not bool(pred):
            return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in carried)
        while bool(pred):
            with self:
                carried = tuple(body_fn(*carried, *additional_inputs))
                pred = cond_fn(*carried, *additional_inputs)
        return carried
