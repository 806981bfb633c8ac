"""CSE bugs from torch's tracker, re-planted in refimpl's own pass.

Each backend runs :func:`refimpl.cse.fx_graph_cse` with one of its rules replaced, for the
duration of the call, by the rule as the historical code had it (``unittest.mock.patch`` on
the names ``refimpl.cse.eliminate`` looks up). Nothing outside the call is changed.
"""

from __future__ import annotations

import dataclasses
from unittest import mock

from torch import fx

from refimpl.cse import eliminate, keys
from refimpl.cse.eliminate import fx_graph_cse

_REAL_FREEZE = keys.freeze
_REAL_EFFECTS = eliminate.effects_of
_REAL_CAN_SHARE = eliminate.SharedStorage.can_share


class _PlantedCSE:
    """refimpl's CSE with ``patches()`` in force while it runs."""

    component = "cse"

    def patches(self) -> list:
        raise NotImplementedError

    def fx_graph_cse(self, graph: fx.Graph) -> fx.Graph:
        patches = self.patches()
        for patch in patches:
            patch.start()
        try:
            return fx_graph_cse(graph)
        finally:
            for patch in reversed(patches):
                patch.stop()


def _freeze_by_value(value, node_key):
    """The key before the fix: a number is keyed by its value, so ``1 == 1.0 == True``."""
    if type(value) in (int, float, bool):
        return ("number", value)
    return _REAL_FREEZE(value, node_key)


class NumbersByValueCSE(_PlantedCSE):
    """pytorch/pytorch#119567, "Fixed hash issue in `fx_graph_cse`".

    fx_graph_cse hashed the arguments, and ``hash((x, 1.0)) == hash((x, 1))``: ``size - 1``
    and ``size - 1.0`` were merged, and an int result stood for a float one. Planted: numbers
    are keyed by their value, not their type. Caught by test_cse.py's
    ``test_cse_tells_constants_apart_by_type_and_bits``.
    """

    name = "zoo:cse-numbers-by-value"
    issue = "pytorch/pytorch#119567"
    title = "Fixed hash issue in `fx_graph_cse`"
    catcher = "test_cse::test_cse_tells_constants_apart_by_type_and_bits"

    def patches(self) -> list:
        return [mock.patch.object(keys, "freeze", _freeze_by_value),
                mock.patch.object(eliminate, "freeze", _freeze_by_value)]


def _share_returned(self, duplicate, rep, effect) -> bool:
    """``can_share`` without its escape rule: two fresh values that both reach the output
    may become one tensor."""
    if effect.aliases and duplicate in self.returned and rep in self.returned:
        return False
    if effect.aliases and not effect.maybe_copy:
        return True
    mine, theirs = self.root(duplicate), self.root(rep)
    since = self.facts.position[rep]
    return (self._unseen(self._first_write(mine, since), self.last_read[theirs])
            and self._unseen(self._first_write(theirs, since), self.last_read[mine]))


class MergesReturnedOutputsCSE(_PlantedCSE):
    """pytorch/pytorch#114344, "[AOTAutograd] Incorrect CSE aliasing while `requires_grad`
    meta differs".

    ``out = x + 1`` and ``out2 = x + 1`` were both returned; CSE merged them, so the compiled
    function returned one tensor twice (``out is out2``) where eager returns two, and a
    write to one output showed in the other. Planted: the rule that two returned values stay
    two tensors is dropped. Caught by test_cse.py's
    ``test_cse_keeps_returned_tensors_distinct``.
    """

    name = "zoo:cse-merges-returned-outputs"
    issue = "pytorch/pytorch#114344"
    title = "[AOTAutograd] Incorrect CSE aliasing while `requires_grad` meta differs"
    catcher = "test_cse::test_cse_keeps_returned_tensors_distinct"

    def patches(self) -> list:
        return [mock.patch.object(eliminate.SharedStorage, "can_share", _share_returned)]


def _writes_forgotten(nodes):
    """Effects as before the fix: a mutation is not a barrier (its writes are not seen)."""
    effects = _REAL_EFFECTS(nodes)
    return {n: dataclasses.replace(e, writes=()) for n, e in effects.items()}


class MutationNotABarrierCSE(_PlantedCSE):
    """pytorch/pytorch#132243, "make functorch CSE respect mutations as barriers (like
    fsdp.set_)" (fixing #132200).

    functorch's CSE keyed a value by its node alone, so ``y = x + 1`` read before an
    in-place write to ``x`` and ``y2 = x + 1`` read after it were merged: ``y2`` got the
    stale value. Planted: writes do not bump the version a value is keyed by. Caught by
    test_cse.py's ``test_cse_is_sound``.
    """

    name = "zoo:cse-mutation-not-a-barrier"
    issue = "pytorch/pytorch#132243"
    title = "make functorch CSE respect mutations as barriers (like fsdp.set_)"
    catcher = "test_cse::test_cse_is_sound"

    def patches(self) -> list:
        return [mock.patch.object(eliminate, "effects_of", _writes_forgotten)]


def _share_written(self, duplicate, rep, effect) -> bool:
    """``can_share`` that ignores writes: two fresh buffers may merge though one is then
    written while the other is still read."""
    if effect.aliases and duplicate in self.returned and rep in self.returned:
        return False
    if effect.aliases and not effect.maybe_copy:
        return True
    mine, theirs = self.root(duplicate), self.root(rep)
    return not (self.escapes[mine] and self.escapes[theirs])


class MergesMutatedFactoriesCSE(_PlantedCSE):
    """pytorch/pytorch#188280, "Don't CSE factory ops feeding distinct auto_functionalized
    mutation bases (#170160)".

    Two identical factory calls (``ones_like`` -> ``aten.full``) that each became the base
    of a later in-place write were merged into one buffer: the two writes then landed in
    the same memory. Planted: two fresh buffers merge even when one is written while the
    other is read. Caught by test_cse.py's ``test_cse_is_sound``.
    """

    name = "zoo:cse-merges-mutated-factories"
    issue = "pytorch/pytorch#188280"
    title = "Don't CSE factory ops feeding distinct auto_functionalized mutation bases (#170160)"
    catcher = "test_cse::test_cse_is_sound"

    def patches(self) -> list:
        return [mock.patch.object(eliminate.SharedStorage, "can_share", _share_written)]


def _random_as_pure(nodes):
    """Effects as TorchScript's CSE saw them before the fix: a random op is pure."""
    effects = _REAL_EFFECTS(nodes)
    return {n: dataclasses.replace(e, kind="pure") if e.kind == "random" and not e.writes
            else e for n, e in effects.items()}


class MergesRandomCSE(_PlantedCSE):
    """pytorch/pytorch#14776, "[jit] don't allow cse to clean up nondeterministic nodes".

    TorchScript's CSE merged two calls of a random op with the same arguments (two
    ``rand`` calls became one draw). Planted: random ops count as pure. Caught by
    test_cse.py's ``test_random_and_mutating_nodes_are_never_merged``.
    """

    name = "zoo:cse-merges-random"
    issue = "pytorch/pytorch#14776"
    title = "[jit] don't allow cse to clean up nondeterministic nodes"
    catcher = "test_cse::test_random_and_mutating_nodes_are_never_merged"

    def patches(self) -> list:
        return [mock.patch.object(eliminate, "effects_of", _random_as_pure)]


#: the random ops the FX CSE pass banned by name before it read the tag (its ``rand_ops``).
LISTED_RANDOM = frozenset({"dropout", "_fused_dropout", "_standard_gamma", "bernoulli",
                           "multinomial", "native_dropout", "normal", "poisson",
                           "binomial", "rrelu", "rand_like", "rand", "randint", "randn",
                           "randperm"})


def _unlisted_random_as_pure(nodes):
    """Only the listed random ops are random; a random op missing from the list is pure."""
    effects = _REAL_EFFECTS(nodes)

    def listed(node: fx.Node) -> bool:
        name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
        return name.rstrip("_") in LISTED_RANDOM

    return {n: dataclasses.replace(e, kind="pure")
            if e.kind == "random" and not e.writes and not listed(n) else e
            for n, e in effects.items()}


class UnlistedRandomCSE(_PlantedCSE):
    """pytorch/pytorch#83650, "Coverage for nondeterministic_seeded, respect it in constant
    prop".

    The FX CSE pass banned random ops by a hand-written list (``rand_ops``) instead of the
    ``nondeterministic_seeded`` tag; a random op missing from the list (``randn_like``,
    ``uniform``, ``exponential``, ...) was merged like a pure one. Planted: only the listed
    names are random. Caught by test_cse.py's
    ``test_random_and_mutating_nodes_are_never_merged``, when it draws an unlisted random op.
    """

    name = "zoo:cse-unlisted-random"
    issue = "pytorch/pytorch#83650"
    title = "Coverage for nondeterministic_seeded, respect it in constant prop"
    catcher = "test_cse::test_random_and_mutating_nodes_are_never_merged"

    def patches(self) -> list:
        return [mock.patch.object(eliminate, "effects_of", _unlisted_random_as_pure)]


def _share_returned_views(self, duplicate, rep, effect) -> bool:
    """``can_share`` without its view rule: two equal returned views become one object."""
    if effect.aliases and not effect.maybe_copy:
        return True
    return _REAL_CAN_SHARE(self, duplicate, rep, effect)


class MergesReturnedViewsCSE(_PlantedCSE):
    """pytorch/pytorch#18500, "Don't allow CSE & Constant Pooling to introduce new aliasing
    of graph outputs".

    TorchScript's CSE merged equal values even when both were graph outputs: the caller
    got one object twice and, since outputs may be mutated once returned, a write through
    one showed in the other. Planted: two equal views that are both returned become one
    object. Caught by test_cse.py's ``test_cse_keeps_returned_tensors_distinct``, when a
    graph returns two equal views.
    """

    name = "zoo:cse-merges-returned-views"
    issue = "pytorch/pytorch#18500"
    title = "Don't allow CSE & Constant Pooling to introduce new aliasing of graph outputs"
    catcher = "test_cse::test_cse_keeps_returned_tensors_distinct"

    def patches(self) -> list:
        return [mock.patch.object(eliminate.SharedStorage, "can_share", _share_returned_views)]


def _freeze_ints_by_hash(value, node_key):
    """An int keyed by ``hash(value)``: ``hash(-1) == hash(-2)`` in CPython."""
    if type(value) is int:
        return ("int", hash(value))
    return _REAL_FREEZE(value, node_key)


class IntsByHashCSE(_PlantedCSE):
    """pytorch/pytorch#127980, "[export] apply CSE pass in _export_to_aten_ir() for
    deduplication".

    While adding CSE to export, the pass's hashing made ``hash((node, -1))`` collide with
    ``hash((node, -2))`` (CPython hashes -1 as -2), "taking forever to debug": a key
    compared by hash alone merges calls that differ in such an argument. Planted: ints are
    keyed by their hash. Caught by test_cse.py's ``test_cse_is_sound`` when a graph holds
    two calls that differ only in -1 vs -2 (a dim, a shift).
    """

    name = "zoo:cse-ints-by-hash"
    issue = "pytorch/pytorch#127980"
    title = "[export] apply CSE pass in _export_to_aten_ir() for deduplication"
    catcher = "test_cse::test_cse_is_sound"

    def patches(self) -> list:
        return [mock.patch.object(keys, "freeze", _freeze_ints_by_hash),
                mock.patch.object(eliminate, "freeze", _freeze_ints_by_hash)]


ZOO = [NumbersByValueCSE, MergesReturnedOutputsCSE, MutationNotABarrierCSE,
       MergesMutatedFactoriesCSE, MergesRandomCSE, UnlistedRandomCSE, MergesReturnedViewsCSE,
       IntsByHashCSE]
