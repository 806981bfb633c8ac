"""The oracle's strength: the mutation score of each component's target properties.

A mutant is refimpl with one small change (an operator, a constant, a comparison, a boolean)
made by cosmic-ray. The *killing suite* of a component is its target properties (the tests in
``properties/test_<component>*.py`` that take the ``refimpl_backend`` fixture), run against
refimpl under the ``ci`` Hypothesis profile, stopping at the first failure. A mutant is killed
when that suite fails (or runs past the per-mutant timeout), survives when it passes. The score
of a component is ``killed / (killed + survived - equivalent)``, with its 95% Wilson interval,
where ``equivalent`` are the survivors whose ``EQUIVALENT`` entry names a test that
demonstrates the equivalence and passes in the run, and every annotation-only mutant. There is
no other column: a target property kills a mutant or it survives.

The protocol (:mod:`mutation_protocol`, docs/oracle-strength.md): every run draws a fresh seed
(``--seed`` replays one), printed first and stored in the run's JSON with the commit and the
property files that differ from it; the score that counts is the first run of a new seed.

Algorithm, per component:
  1. copy the source tree into a work folder (cosmic-ray mutates files in place: never the
     checkout itself);
  2. run the killing suite once unmutated (the baseline): a target property that fails
     there cannot judge a mutant, so it is deselected, and the report says so; the per-mutant
     timeout is the larger of ``--timeout`` and twice the (traced) baseline's wall;
  3. ``cosmic-ray init`` over ALL the component's modules (``MODULES``; ``LEFT_OUT`` holds
     only re-export modules, each checked by tests/test_mutation_score.py): every mutant of
     every operator, minus ``EXCLUDED_OPERATORS``;
  4. keep a seeded sample of ``--sample`` mutants (:func:`stratified`), mark the rest skipped;
  5. ``cosmic-ray exec``: one test command per mutant, the tests that execute the mutated
     statement (:mod:`mutation_select`). Importing torch costs more than the suite itself on a
     loaded machine, so the command is a thin client of a fork server (``--serve``) that has
     imported torch, Hypothesis and pytest, but never refimpl: each mutant's suite runs in a
     fresh fork that imports the mutated refimpl from the work folder, as a new process
     would. With ``--jobs N`` the sample is dealt into N shards, each a copy of the work
     folder with its own fork server, run side by side and merged back into one session;
  6. each survivor listed in ``EQUIVALENT``: its named test run on the unmutated tree;
  7. print and write (``--json``) killed / survived / score / interval per component, and
     every survivor (file:line operator).
Invariant: the same seed, sample size and source give the same mutants.

Run it (long; the nightly job .github/workflows/mutation.yml):
``python benchmarks/mutation_score.py --jobs 2`` (``tox -e mutation -- --jobs 2``). Needs the
``mutation`` extra (cosmic-ray). ``--report`` re-prints the figures of a finished run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mutation_protocol import (
    draw_seed,
    equivalents_without_a_test,
    estimated_seconds,
    first_run,
    head_commit,
    properties_changed,
    wilson_interval,
)
from mutation_select import EVERY_TEST, LineTracer, only_annotations, select_tests

ROOT = Path(__file__).resolve().parent.parent

#: Each component's folder: every module under it is mutated or listed in LEFT_OUT.
COMPONENT_DIRS = {"flops": "refimpl/flops", "cse": "refimpl/cse",
                  "partition": "refimpl/partition", "checkpoint": "refimpl/checkpointing",
                  "layout": "refimpl/layout"}

#: Every module of each component, the code a user of the component runs (its command line,
#: its explain API and its solvers included): a mutant in code no target property executes
#: survives, and the report says "no target property executes the mutated statement".
MODULES = {
    "flops": [f"refimpl/flops/{m}.py" for m in (
        "cli", "counter", "free_ops", "models", "module_tracker", "summary", "table")]
    + [f"refimpl/flops/formulas/{m}.py" for m in (
        "attention", "conv", "matmul", "registry", "rnn", "transformer")],
    "cse": [f"refimpl/cse/{m}.py" for m in (
        "aliasing", "effects", "eliminate", "graph_check", "keys")],
    "partition": [f"refimpl/partition/{m}.py" for m in (
        "api", "backend", "candidates", "cost", "cut", "errors", "exact", "exhaustive",
        "fx_edge", "graph", "knapsack", "mincut", "mutation", "options", "partitioner",
        "plan", "problem", "region", "runtime")],
    "checkpoint": [f"refimpl/checkpointing/{m}.py" for m in (
        "debug", "frame", "options", "replay", "versions", "wrapper")],
    "layout": [f"refimpl/layout/{m}.py" for m in (
        "__init__", "decision", "facts", "ops", "options", "plan", "rewrite")],
}

#: Why a module holds nothing to mutate: a docstring, imports, ``__all__`` and names bound to
#: other modules' names (tests/test_mutation_score.py checks each such module's AST).
REEXPORTS_ONLY = "re-exports only: a docstring, imports, __all__, aliases"

#: The modules of a component that are not mutated, each with its reason.
LEFT_OUT: dict[str, str] = {
    "refimpl/flops/__init__.py": REEXPORTS_ONLY,
    "refimpl/flops/formulas/__init__.py": REEXPORTS_ONLY,
    "refimpl/cse/__init__.py": REEXPORTS_ONLY,
    "refimpl/partition/__init__.py": REEXPORTS_ONLY,
    "refimpl/checkpointing/__init__.py": REEXPORTS_ONLY,
}

#: Mutants per component by default, sized for a nightly job on 2 cores (``--jobs 2``): with
#: SECONDS_PER_MUTANT about 20 minutes for the four fast components together and 45 for
#: partition. A sample of n has a 95% interval about +-sqrt(0.9 * 0.1 / n) * 2 wide at 90%:
#: +-6% at 100, +-9% at 40.
DEFAULT_SAMPLE = {"flops": 100, "cse": 100, "partition": 40, "checkpoint": 100, "layout": 100}

#: Core-seconds a mutant costs (baseline included), from the walls of the 2026-11-26 run
#: (40 mutants, 2 shards, 2 cores; flops 91 s, cse 70 s, partition 2,603 s, checkpoint 94 s,
#: layout 109 s). Only an estimate: that run mutated fewer modules, and a mutant that hangs
#: costs its whole timeout (a smoke run of 3 cse mutants over every module, on a loaded
#: machine: 656 s, one of them killed by the 300 s timeout). Each run records its estimate
#: beside its wall, so the table can be re-measured.
SECONDS_PER_MUTANT = {"flops": 4.6, "cse": 3.5, "partition": 130.0, "checkpoint": 4.7,
                      "layout": 5.5}

#: Operators left out, and why: replacing + - * / with a bit or shift operator, ** or % almost
#: always raises at once (killed for free, inflating the score); the variable inserter and
#: replacer pick names at random (not repeatable).
EXCLUDED_OPERATORS = [
    r"core/ReplaceBinaryOperator_.*_(Pow|Mod|RShift|LShift|BitOr|BitAnd|BitXor)$",
    r"core/VariableInserter", r"core/VariableReplacer",
]

#: Survivors shown equivalent: "path:line operator occurrence" -> (the test in tests/ that
#: demonstrates it, e.g. both versions agree on an exhaustive small domain; why). Keys carry
#: line numbers of the tree they were measured on: re-check them when the code moves. The
#: script refuses to run with an entry whose test does not exist (``check_equivalents``) and
#: counts a survivor as equivalent only when that test passes in the run. Annotation-only
#: mutants need no entry: the script shows each one equivalent (``only_annotations``: the
#: module's AST with annotations stripped is unchanged). The equivalences argued for the
#: seed-0 runs had no such test; they are survivors until one is written.
_CSE_EQ = "tests/test_mutation_equivalents_cse.py::"
_LAYOUT_EQ = "tests/test_mutation_equivalents_layout.py::"
_FLOPS_EQ = "tests/test_mutation_equivalents_flops.py::"
_CHECKPOINT_EQ = "tests/test_mutation_equivalents_checkpoint.py::"
_PARTITION_EQ = "tests/test_mutation_equivalents_partition.py::"
EQUIVALENT: dict[str, tuple[str, str]] = {
    # shown after the first run of seed 731252159 (cse), each by its test:
    "refimpl/cse/aliasing.py:46 core/ReplaceComparisonOperator_IsNot_NotEq 0":
        (_CSE_EQ + "test_node_inequality_is_identity",
         "fx.Node has no equality of its own: != between nodes is identity"),
    "refimpl/cse/eliminate.py:187 core/ReplaceComparisonOperator_IsNot_NotEq 3":
        (_CSE_EQ + "test_node_inequality_is_identity",
         "fx.Node has no equality of its own: != between nodes is identity"),
    "refimpl/cse/aliasing.py:56 core/ReplaceComparisonOperator_Eq_GtE 0":
        (_CSE_EQ + "test_treating_placeholders_as_outputs_adds_no_value",
         "ops >= 'output' are output, placeholder, root; a placeholder's args hold no node"),
    "refimpl/cse/effects.py:118 core/NumberReplacer 3":
        (_CSE_EQ + "test_a_maybe_copy_re_run_has_exactly_one_alias",
         "guarded by len(aliases) == 1: aliases[-1] is aliases[0]"),
    "refimpl/cse/effects.py:282 core/ReplaceComparisonOperator_Eq_LtE 5":
        (_CSE_EQ + "test_only_call_function_sorts_at_or_before_call_function",
         "of the node ops only 'call_function' is <= 'call_function'"),
    "refimpl/cse/effects.py:294 core/ReplaceComparisonOperator_Eq_LtE 6":
        (_CSE_EQ + "test_only_call_function_sorts_at_or_before_call_function",
         "of the node ops only 'call_function' is <= 'call_function'"),
    "refimpl/cse/effects.py:297 core/ReplaceComparisonOperator_Is_Eq 4":
        (_CSE_EQ + "test_sym_functions_compare_by_identity",
         "torch.sym_* are functions: == is identity"),
    "refimpl/cse/eliminate.py:119 core/ReplaceComparisonOperator_Lt_NotEq 0":
        (_CSE_EQ + "test_first_write_index_bound",
         "bisect_right returns 0..len: i < len iff i != len (exhaustive)"),
    "refimpl/cse/eliminate.py:126 core/ReplaceComparisonOperator_Gt_GtE 0":
        (_CSE_EQ + "test_unseen_compares_only_unequal_positions",
         "under write != last_read, > and >= agree (exhaustive)"),
    "refimpl/cse/eliminate.py:153 core/ReplaceTrueWithFalse 1":
        (_CSE_EQ + "test_merge_pass_is_never_mutated_nor_hashed",
         "MergePass is never assigned to nor hashable (dict field): frozen changes nothing"),
    "refimpl/cse/keys.py:49 core/ReplaceComparisonOperator_Is_Eq 0":
        (_CSE_EQ + "test_type_equality_is_identity",
         "no argument type's metaclass defines =="),
    "refimpl/cse/keys.py:51 core/ReplaceComparisonOperator_Is_Eq 1":
        (_CSE_EQ + "test_type_equality_is_identity",
         "no argument type's metaclass defines =="),
    "refimpl/cse/keys.py:51 core/ReplaceComparisonOperator_Is_Eq 2":
        (_CSE_EQ + "test_type_equality_is_identity",
         "no argument type's metaclass defines =="),
    "refimpl/cse/keys.py:53 core/ReplaceComparisonOperator_Is_Eq 3":
        (_CSE_EQ + "test_type_equality_is_identity",
         "no argument type's metaclass defines =="),
    "refimpl/cse/keys.py:55 core/ReplaceComparisonOperator_Is_Eq 4":
        (_CSE_EQ + "test_type_equality_is_identity",
         "no argument type's metaclass defines =="),
    "refimpl/cse/keys.py:51 core/ReplaceOrWithAnd 0":
        (_CSE_EQ + "test_lists_and_tuples_key_alike_on_either_path",
         "lists and tuples then take _freeze_other's list/tuple rule: the same key"),
    # shown by the layout helper after the first run of seed 731252159 (keys on the tree
    # that follows it), each by its test:
    "refimpl/layout/facts.py:112 core/ReplaceComparisonOperator_NotEq_IsNot 3":
        (_LAYOUT_EQ + "test_op_kinds_are_the_module_constants",
         "op_kind gives one of the three kind constants or None: is and == agree"),
    "refimpl/layout/plan.py:83 core/ReplaceComparisonOperator_Eq_Is 6":
        (_LAYOUT_EQ + "test_op_kinds_are_the_module_constants",
         "op_kind gives one of the three kind constants or None: is and == agree"),
    "refimpl/layout/ops.py:61 core/ReplaceComparisonOperator_Eq_Is 1":
        (_LAYOUT_EQ + "test_op_kinds_are_the_module_constants",
         "op_kind gives one of the three kind constants or None: is and == agree"),
    "refimpl/layout/ops.py:73 core/ReplaceComparisonOperator_Eq_Is 4":
        (_LAYOUT_EQ + "test_op_kinds_are_the_module_constants",
         "op_kind gives one of the three kind constants or None: is and == agree"),
    "refimpl/layout/plan.py:57 core/ReplaceComparisonOperator_Eq_Is 1":
        (_LAYOUT_EQ + "test_op_kinds_are_the_module_constants",
         "op_kind gives one of the three kind constants or None: is and == agree"),
    "refimpl/layout/plan.py:63 core/ReplaceComparisonOperator_Eq_Is 2":
        (_LAYOUT_EQ + "test_op_kinds_are_the_module_constants",
         "op_kind gives one of the three kind constants or None: is and == agree"),
    "refimpl/layout/plan.py:65 core/ReplaceComparisonOperator_Eq_Is 3":
        (_LAYOUT_EQ + "test_op_kinds_are_the_module_constants",
         "op_kind gives one of the three kind constants or None: is and == agree"),
    "refimpl/layout/plan.py:67 core/ReplaceComparisonOperator_Eq_Is 4":
        (_LAYOUT_EQ + "test_op_kinds_are_the_module_constants",
         "op_kind gives one of the three kind constants or None: is and == agree"),
    "refimpl/layout/plan.py:76 core/ReplaceComparisonOperator_Eq_Is 5":
        (_LAYOUT_EQ + "test_node_ops_are_interned",
         "torch.fx sets Node.op from interned string literals: is and == agree"),
    "refimpl/layout/rewrite.py:59 core/ReplaceComparisonOperator_Eq_Is 1":
        (_LAYOUT_EQ + "test_node_ops_are_interned",
         "torch.fx sets Node.op from interned string literals: is and == agree"),
    "refimpl/layout/facts.py:53 core/ReplaceComparisonOperator_NotEq_IsNot 0":
        (_LAYOUT_EQ + "test_node_ops_are_interned",
         "torch.fx sets Node.op from interned string literals: is and == agree"),
    "refimpl/layout/facts.py:99 core/ReplaceComparisonOperator_NotEq_IsNot 2":
        (_LAYOUT_EQ + "test_node_ops_are_interned",
         "torch.fx sets Node.op from interned string literals: is and == agree"),
    "refimpl/layout/ops.py:59 core/ReplaceComparisonOperator_Eq_Is 0":
        (_LAYOUT_EQ + "test_node_ops_are_interned",
         "torch.fx sets Node.op from interned string literals: is and == agree"),
    "refimpl/layout/ops.py:66 core/ReplaceComparisonOperator_Eq_Is 2":
        (_LAYOUT_EQ + "test_node_ops_are_interned",
         "torch.fx sets Node.op from interned string literals: is and == agree"),
    "refimpl/layout/ops.py:68 core/ReplaceComparisonOperator_Eq_Is 3":
        (_LAYOUT_EQ + "test_node_ops_are_interned",
         "torch.fx sets Node.op from interned string literals: is and == agree"),
    "refimpl/layout/ops.py:87 core/ReplaceComparisonOperator_Eq_Is 5":
        (_LAYOUT_EQ + "test_node_ops_are_interned",
         "torch.fx sets Node.op from interned string literals: is and == agree"),
    "refimpl/layout/rewrite.py:47 core/ReplaceComparisonOperator_IsNot_Gt 0":
        (_LAYOUT_EQ + "test_a_restore_at_definition_precedes_every_other_user",
         "nodes compare by graph position; the restore precedes every other user"),
    "refimpl/layout/rewrite.py:47 core/ReplaceComparisonOperator_IsNot_NotEq 0":
        (_LAYOUT_EQ + "test_a_restore_at_definition_precedes_every_other_user",
         "fx.Node has no equality of its own: != is identity"),
    "refimpl/layout/ops.py:89 core/NumberReplacer 3":
        (_LAYOUT_EQ + "test_a_conv_module_takes_one_argument",
         "Conv2d.forward takes one positional argument"),
    "refimpl/layout/ops.py:90 core/NumberReplacer 4":
        (_LAYOUT_EQ + "test_conv_argument_padding",
         "positions 0, 1 and 6 are the same for every argument count 0-7"),
    "refimpl/layout/facts.py:125 core/NumberReplacer 23":
        (_LAYOUT_EQ + "test_a_dynamic_conv_s_placeholder_shape_decides_nothing",
         "a dynamic site says no before any class is read"),
    "refimpl/layout/facts.py:125 core/NumberReplacer 24":
        (_LAYOUT_EQ + "test_a_dynamic_conv_s_placeholder_shape_decides_nothing",
         "a dynamic site says no before any class is read"),
    "refimpl/layout/facts.py:105 core/ReplaceComparisonOperator_Eq_LtE 2":
        (_LAYOUT_EQ + "test_an_inplace_member_has_its_roots_strides",
         "identity is read only in all-in-place classes, where the view equals its root exactly"),
    "refimpl/layout/facts.py:104 core/ReplaceComparisonOperator_Eq_LtE 1":
        (_LAYOUT_EQ + "test_an_inplace_member_has_its_roots_strides",
         "identity is read only in all-in-place classes, where the view equals its root exactly"),
    "refimpl/layout/facts.py:104 core/ReplaceComparisonOperator_Eq_GtE 1":
        (_LAYOUT_EQ + "test_an_inplace_member_has_its_roots_strides",
         "identity is read only in all-in-place classes, where the view equals its root exactly"),
    "refimpl/layout/facts.py:105 core/ReplaceComparisonOperator_Eq_GtE 2":
        (_LAYOUT_EQ + "test_an_inplace_member_has_its_roots_strides",
         "identity is read only in all-in-place classes, where the view equals its root exactly"),
    "refimpl/layout/facts.py:105 core/ReplaceComparisonOperator_Eq_LtE 3":
        (_LAYOUT_EQ + "test_an_inplace_member_has_its_roots_strides",
         "identity is read only in all-in-place classes, where the view equals its root exactly"),
    "refimpl/layout/facts.py:105 core/ReplaceComparisonOperator_Eq_GtE 3":
        (_LAYOUT_EQ + "test_an_inplace_member_has_its_roots_strides",
         "identity is read only in all-in-place classes, where the view equals its root exactly"),
    "refimpl/layout/facts.py:105 core/ReplaceComparisonOperator_Eq_Is 2":
        (_LAYOUT_EQ + "test_an_inplace_member_has_its_roots_strides",
         "identity is read only in all-in-place classes, where the view equals its root exactly"),
    "refimpl/layout/facts.py:75 core/ReplaceComparisonOperator_NotEq_IsNot 1":
        (_LAYOUT_EQ + "test_layouts_and_conv_classes_are_singletons",
         "layouts and conv classes are singletons: is and == agree"),
    "refimpl/layout/decision.py:113 core/ReplaceComparisonOperator_Eq_Is 2":
        (_LAYOUT_EQ + "test_layouts_and_conv_classes_are_singletons",
         "layouts and conv classes are singletons: is and == agree"),
    # shown by the flops helper after the first run of seed 731252159, each by its test:
    "refimpl/flops/counter.py:139 core/NumberReplacer 6":
        (_FLOPS_EQ + "test_an_unbounded_table_depth_is_any_depth_past_the_deepest_name",
         "depth None is 10**9; each +-1 variant (>= 10**8) is past any module nesting"),
    "refimpl/flops/counter.py:139 core/NumberReplacer 7":
        (_FLOPS_EQ + "test_an_unbounded_table_depth_is_any_depth_past_the_deepest_name",
         "depth None is 10**9; each +-1 variant (>= 10**8) is past any module nesting"),
    "refimpl/flops/counter.py:139 core/NumberReplacer 8":
        (_FLOPS_EQ + "test_an_unbounded_table_depth_is_any_depth_past_the_deepest_name",
         "depth None is 10**9; each +-1 variant (>= 10**8) is past any module nesting"),
    "refimpl/flops/counter.py:139 core/NumberReplacer 9":
        (_FLOPS_EQ + "test_an_unbounded_table_depth_is_any_depth_past_the_deepest_name",
         "depth None is 10**9; each +-1 variant (>= 10**8) is past any module nesting"),
    "refimpl/flops/counter.py:184 core/NumberReplacer 11":
        (_FLOPS_EQ + "test_the_branch_bound_default_below_zero_changes_nothing",
         "FLOP counts are >= 0, so a default of -1 never wins the max over branches"),
    "refimpl/flops/formulas/conv.py:36 core/NumberReplacer 1":
        (_FLOPS_EQ + "test_the_conv_rank_check_differs_only_where_torch_refuses_first",
         "< 3 and < 2 differ only for rank-2 input and weight, which torch refuses first"),
    # shown by the checkpoint helper after the first run of seed 731252159, each by its test:
    "refimpl/checkpointing/frame.py:177 core/ReplaceComparisonOperator_NotEq_Lt 1":
        (_CHECKPOINT_EQ + "test_count_check_sees_at_most_the_forwards_count",
         "a longer recomputation raises first: _check sees only recomputed <= forward"),
    "refimpl/checkpointing/replay.py:29 core/ReplaceTrueWithFalse 0":
        (_CHECKPOINT_EQ + "test_replay_state_is_never_changed_nor_hashed",
         "Autocast is never assigned to, deleted from nor hashed: frozen changes nothing"),
    "refimpl/checkpointing/replay.py:39 core/ReplaceTrueWithFalse 1":
        (_CHECKPOINT_EQ + "test_replay_state_is_never_changed_nor_hashed",
         "GlobalState is never assigned to, deleted from nor hashed: frozen changes nothing"),
    # shown by the partition helper after the first run of seed 731252159, each by its test:
    "refimpl/partition/graph.py:78 core/ReplaceComparisonOperator_Eq_LtE 0":
        (_PARTITION_EQ + "test_graph_76_role_le_backward_is_role_eq_backward",
         "of the five roles fx_edge assigns only 'backward' is <= 'backward'"),
    "refimpl/partition/exhaustive.py:31 core/ReplaceComparisonOperator_Eq_Is 0":
        (_PARTITION_EQ + "test_exhaustive_31_role_is_forward_is_role_eq_forward",
         "roles are fx_edge's interned string literals (AST-checked): is and == agree"),
    "refimpl/partition/cost.py:27 core/ExceptionReplacer 0":
        (_PARTITION_EQ + "test_cost_27_the_fallback_import_never_runs_here",
         "torch >= 2.12: the guarded import succeeds; the handler's type is never evaluated"),
    # shown after the first run of seed 146862235 (answering its survivors), each by its test:
    "refimpl/flops/summary.py:153 core/NumberReplacer 29":
        (_FLOPS_EQ + "test_whole_units_and_three_digits_agree_below_1000",
         "three significant digits of a quotient below 1000 are its whole units: .3g and ,.0f "
         "print the same"),
    "refimpl/flops/formulas/registry.py:159 core/ReplaceContinueWithBreak 0":
        (_FLOPS_EQ + "test_every_kernel_the_table_names_exists_so_present_never_skips",
         "on the installed torch no present() list has a missing kernel before a present one: "
         "the continue never runs"),
    "refimpl/partition/fx_edge.py:174 core/ReplaceComparisonOperator_Eq_Is 7":
        (_PARTITION_EQ + "test_fx_edge_174_role_is_forward_is_role_eq_forward",
         "roles are fx_edge's interned string literals (AST-checked): is and == agree"),
    "refimpl/partition/cost.py:31 core/NumberReplacer 1":
        (_PARTITION_EQ + "test_cost_31_the_fallback_constant_is_never_bound_here",
         "torch >= 2.12: the except branch never runs; the constant is never bound"),
    "refimpl/partition/fx_edge.py:174 core/ReplaceComparisonOperator_Eq_LtE 7":
        (_PARTITION_EQ + "test_fx_edge_174_role_le_forward_prices_backward_nodes_nobody_reads",
         "it prices backward nodes too, whose runtime no stage reads"),
    "refimpl/partition/graph.py:31 core/ReplaceTrueWithFalse 0":
        (_PARTITION_EQ + "test_graph_31_every_joint_node_is_built_by_keyword",
         "kw_only only refuses positional fields, and refimpl builds every node by keyword"),
    "refimpl/partition/cost.py:31 core/NumberReplacer 0":
        (_PARTITION_EQ + "test_cost_31_the_fallback_constant_is_never_bound_here",
         "torch >= 2.12: the except branch never runs; the constant is never bound"),
    "refimpl/partition/mincut.py:109 core/ReplaceComparisonOperator_Eq_Gt 1":
        (_PARTITION_EQ + "test_mincut_109_a_view_with_bytes_has_a_forward_owner",
         "a forward view with bytes always has a forward owner (views of inputs cost 0 bytes)"),
    "refimpl/partition/mutation.py:112 core/ReplaceComparisonOperator_NotEq_Gt 0":
        (_PARTITION_EQ + "test_mutation_112_a_version_counter_never_falls",
         "version counters only rise: != and > agree"),
    "refimpl/partition/problem.py:32 core/ReplaceTrueWithFalse 1":
        (_PARTITION_EQ + "test_problem_32_a_problem_is_never_changed_nor_hashed",
         "Problem is never assigned to, deleted from nor hashed: frozen changes nothing"),
    # shown after the first run of seed 2725162462 (it counted them as survivors):
    "refimpl/partition/mincut.py:52 core/NumberReplacer 2":
        (_PARTITION_EQ + "test_mincut_52_any_negative_level_marks_an_unreached_vertex",
         "a level is only read as < 0, >= 0 or == a reached level + 1: any negative agrees"),
    "refimpl/partition/mincut.py:67 core/ReplaceComparisonOperator_NotEq_Lt 0":
        (_PARTITION_EQ + "test_mincut_67_the_sink_is_the_last_vertex",
         "the sink is the network's last vertex, so u < t and u != t agree"),
    "refimpl/partition/knapsack.py:51 core/NumberReplacer 13":
        (_PARTITION_EQ + "test_knapsack_51_the_dp_front_is_the_same_without_the_runtime_tie_break",
         "the front returns the first state of greatest runtime in memory order either way"),
    # shown after the first run of seed 937988035 (it counted it as a survivor):
    "refimpl/partition/candidates.py:124 core/ReplaceComparisonOperator_Eq_GtE 6":
        (_PARTITION_EQ + "test_candidates_124_role_ge_forward_adds_only_primals_which_no_plan_"
         "recomputes",
         "on the forward side >= 'forward' adds primals, which no plan recomputes"),
    "refimpl/partition/partitioner.py:39 core/NumberReplacer 2":
        (_PARTITION_EQ + "test_partitioner_39_a_span_floor_of_one_gives_the_same_bound",
         "where max <= min the bound is clamped to max either way (all pairs 0-40)"),
    "refimpl/partition/runtime.py:151 core/ReplaceComparisonOperator_NotEq_Gt 0":
        (_PARTITION_EQ + "test_runtime_151_call_function_is_the_least_node_op",
         "every other legal fx node op sorts after 'call_function'"),
    "refimpl/partition/knapsack.py:38 core/ReplaceComparisonOperator_Lt_Eq 2":
        (_PARTITION_EQ + "test_knapsack_38_no_solve_gives_the_knapsack_a_capacity_below_one",
         "solve returns the min plan when the bound leaves no room: the capacity is >= 1"),
    "refimpl/partition/exact.py:163 core/NumberReplacer 62":
        (_PARTITION_EQ + "test_exact_163_the_first_programme_is_never_infeasible",
         "the bound is at least the min plan's bytes, a feasible point: never infeasible"),
    "refimpl/layout/decision.py:43 core/ReplaceComparisonOperator_Gt_NotEq 0":
        (_LAYOUT_EQ + "test_conv_groups_are_positive",
         "torch refuses groups < 1: > 0 and != 0 agree on every groups a conv can have"),
    "refimpl/layout/decision.py:99 core/ReplaceComparisonOperator_Eq_LtE 1":
        (_LAYOUT_EQ + "test_never_returns_before_the_always_test",
         "'never' returns first; of the modes left only 'always' is <= 'always'"),
    "refimpl/layout/ops.py:87 core/ReplaceComparisonOperator_Eq_GtE 5":
        (_LAYOUT_EQ + "test_op_kinds_are_the_module_constants",
         "conv nodes are call_function or call_module, where >= answers as =="),
    "refimpl/layout/facts.py:125 core/NumberReplacer 25":
        (_LAYOUT_EQ + "test_a_dynamic_conv_s_placeholder_shape_decides_nothing",
         "a dynamic site says no before any conv class is read"),
    "refimpl/layout/facts.py:105 core/ReplaceComparisonOperator_Eq_IsNot 1":
        (_LAYOUT_EQ + "test_an_inplace_member_has_its_roots_strides",
         "stride() returns a fresh tuple each call; only exact in-place members are read"),
    "refimpl/layout/ops.py:71 core/ReplaceFalseWithTrue 0":
        (_LAYOUT_EQ + "test_an_activation_without_inplace_plans_alike_as_inplace",
         "the activation modules always have inplace; a one-input activation with a fresh "
         "result plans the same either way"),
    "refimpl/layout/ops.py:99 core/ReplaceFalseWithTrue 1":
        (_LAYOUT_EQ + "test_an_activation_without_inplace_plans_alike_as_inplace",
         "the activation modules always have inplace; a one-input activation with a fresh "
         "result plans the same either way"),
    "refimpl/checkpointing/frame.py:169 core/ReplaceComparisonOperator_Eq_GtE 1":
        (_CHECKPOINT_EQ + "test_early_stop_count_reaches_the_holders_count_only_by_equality",
         "after line 160, len(seen) <= len(holders): >= and == agree"),
    "refimpl/checkpointing/frame.py:66 core/RemoveDecorator 1":
        (_CHECKPOINT_EQ + "test_input_saver_backward_is_the_same_function_either_way",
         "autograd calls backward through the class: the same function, staticmethod or not"),
    "refimpl/checkpointing/options.py:57 core/ReplaceTrueWithFalse 0":
        (_CHECKPOINT_EQ + "test_options_and_reads_are_never_changed_nor_hashed",
         "CheckpointOptions is never assigned, deleted or hashed: frozen changes nothing"),
    "refimpl/checkpointing/versions.py:39 core/ReplaceTrueWithFalse 0":
        (_CHECKPOINT_EQ + "test_options_and_reads_are_never_changed_nor_hashed",
         "Read is never assigned, deleted or hashed: frozen changes nothing"),
    "refimpl/checkpointing/replay.py:46 core/ReplaceFalseWithTrue 0":
        (_CHECKPOINT_EQ + "test_global_state_is_always_built_with_every_field",
         "every GlobalState(...) passes all four fields: the default is never read"),
    "refimpl/cse/aliasing.py:73 core/ReplaceComparisonOperator_IsNot_NotEq 2":
        (_CSE_EQ + "test_node_inequality_is_identity",
         "fx.Node has no equality of its own: != between nodes is identity"),
    "refimpl/cse/effects.py:175 core/ReplaceComparisonOperator_Eq_GtE 2":
        (_CSE_EQ + "test_a_method_name_is_no_function",
         "call_method targets are strings, which have no __module__"),
    "refimpl/cse/effects.py:294 core/ReplaceComparisonOperator_Eq_GtE 6":
        (_CSE_EQ + "test_a_method_name_is_no_function",
         "for a string target the name is empty, so every check is False"),
    "refimpl/cse/eliminate.py:94 core/NumberReplacer 0":
        (_CSE_EQ + "test_an_unread_class_reads_before_every_position",
         "any negative default for a class nobody read behaves alike"),
    "refimpl/cse/eliminate.py:183 core/ReplaceComparisonOperator_IsNot_Lt 2":
        (_CSE_EQ + "test_node_order_is_graph_order",
         "first is the node or an earlier one: < is graph order, so < and is not agree"),
    "refimpl/cse/eliminate.py:183 core/ReplaceComparisonOperator_IsNot_NotEq 2":
        (_CSE_EQ + "test_node_inequality_is_identity",
         "fx.Node has no equality of its own: != between nodes is identity"),
    "refimpl/cse/eliminate.py:187 core/ReplaceComparisonOperator_IsNot_Is 3":
        (_CSE_EQ + "test_the_result_is_a_fixpoint",
         "the mutant only adds passes over a result that is already a fixpoint"),
    "refimpl/cse/eliminate.py:191 core/ReplaceComparisonOperator_IsNot_Lt 4":
        (_CSE_EQ + "test_node_order_is_graph_order",
         "first is the node or an earlier one: < is graph order, so < and is not agree"),
    "refimpl/cse/graph_check.py:44 core/ReplaceComparisonOperator_IsNot_NotEq 0":
        (_CSE_EQ + "test_graph_inequality_is_identity",
         "fx.Graph has no equality of its own: != between graphs is identity"),
    "refimpl/flops/free_ops.py:152 core/ReplaceAndWithOr 0":
        (_FLOPS_EQ + "test_the_in_place_base_rule_needs_a_trailing_underscore",
         "no aten/prims/prim/higher-order op name of this torch, its last character cut, is a "
         "free name unless the op is already free"),
    "refimpl/flops/models.py:229 core/ReplaceComparisonOperator_Eq_LtE 3":
        (_FLOPS_EQ + "test_hf_is_the_only_builtin_kind_at_or_below_hf",
         "only non-factory MODELs reach the line, so with a ':' the kind is hf (torchvision is "
         "handled before): == and <= agree"),
    "refimpl/flops/table.py:65 core/NumberReplacer 17":
        (_FLOPS_EQ + "test_a_negative_indent_is_no_indent",
         "the indent is used only as ' ' * indent, and ' ' * -1 == ''"),
    "refimpl/checkpointing/frame.py:78 core/ReplaceComparisonOperator_Eq_Is 0":
        (_CHECKPOINT_EQ + "test_the_graph_task_id_outside_a_backward_is_the_cached_minus_one",
         "the graph task id is an int made from a C long; CPython shares one -1 object, so is "
         "and == agree"),
    "refimpl/cse/aliasing.py:48 core/ReplaceComparisonOperator_IsNot_NotEq 1":
        (_CSE_EQ + "test_node_inequality_is_identity",
         "fx.Node defines no equality of its own, so != is identity"),
    "refimpl/cse/effects.py:235 core/ReplaceUnaryOperator_USub_UAdd 0":
        (_CSE_EQ + "test_every_schema_name_has_one_namespace_separator",
         "every registered schema name splits into two parts on '::', so [+1] is [-1]"),
    "refimpl/cse/effects.py:326 core/ReplaceOrWithAnd 18":
        (_CSE_EQ + "test_an_inplace_draw_is_random_or_mutating_alike",
         "where the conditions differ the node is an in-place random method: random or "
         "mutating with the same writes and aliases, and CSE asks only whether it is pure"),
    "refimpl/cse/eliminate.py:171 core/NumberReplacer 2":
        (_CSE_EQ + "test_the_result_is_a_fixpoint",
         "refused = 1 only adds passes over a result that is already a fixpoint"),
    "refimpl/cse/eliminate.py:187 core/ReplaceComparisonOperator_IsNot_Eq 3":
        (_CSE_EQ + "test_the_result_is_a_fixpoint",
         "fx.Node equality is identity: first == node is first is node"),
    "refimpl/partition/mincut.py:71 core/ReplaceComparisonOperator_Eq_GtE 0":
        (_PARTITION_EQ + "test_mincut_71_level_ge_is_level_eq",
         "Dinic's levels: an edge with capacity left never skips a level forward, so >= holds "
         "where == does"),
    "refimpl/partition/region.py:57 core/ReplaceComparisonOperator_Eq_GtE 0":
        (_PARTITION_EQ + "test_region_57_role_ge_forward_is_role_eq_forward_off_placeholders",
         "the roles >= 'forward' adds are carried only by placeholder and output nodes, which "
         "the condition drops"),
    "refimpl/partition/candidates.py:88 core/ReplaceComparisonOperator_Eq_GtE 4":
        (_PARTITION_EQ + "test_candidates_88_role_ge_forward_adds_no_unsavable_primal",
         "'>=' adds primals, which are always savable and never marked recompute"),
    "refimpl/partition/knapsack.py:90 core/ReplaceComparisonOperator_LtE_Is 2":
        (_PARTITION_EQ + "test_knapsack_90_the_bound_at_max_is_the_max_plans_own_int",
         "the bound never exceeds high's bytes, and equals them only as high's own int object "
         "(min and max return their first argument on a tie)"),
    "refimpl/partition/knapsack.py:36 core/ReplaceComparisonOperator_Lt_LtE 1":
        (_PARTITION_EQ + "test_knapsack_36_no_item_has_a_runtime_at_or_below_zero",
         "knapsack's solvers are internal; their one caller passes candidates' items, whose "
         "runtimes are all > 0"),
    "refimpl/layout/decision.py:47 core/ReplaceComparisonOperator_Gt_NotEq 2":
        (_LAYOUT_EQ + "test_a_conv_kernel_is_at_least_one_row_high",
         "torch refuses a kernel of height 0, so kh >= 1, where != 1 answers as > 1"),
    "refimpl/layout/decision.py:113 core/ReplaceComparisonOperator_Eq_GtE 2":
        (_LAYOUT_EQ + "test_small_is_the_greatest_class_name",
         "'small' sorts after the other three class names: == and >= agree"),
    "refimpl/layout/plan.py:57 core/ReplaceComparisonOperator_Eq_Is 0":
        (_LAYOUT_EQ + "test_an_alias_root_is_its_root_node_s_name",
         "a class's root name is the root node's own name string: is and == agree"),
    "refimpl/layout/ops.py:90 core/NumberReplacer 5":
        (_LAYOUT_EQ + "test_conv_argument_padding",
         "a conv that reaches conv_operands has a positional argument, so padding with 6 "
         "reads the same positions"),
    "refimpl/layout/facts.py:125 core/NumberReplacer 18":
        (_LAYOUT_EQ + "test_a_dynamic_conv_s_placeholder_shape_decides_nothing",
         "a dynamic site says no before any class is read"),
    "refimpl/layout/facts.py:125 core/NumberReplacer 19":
        (_LAYOUT_EQ + "test_a_dynamic_conv_s_placeholder_shape_decides_nothing",
         "a dynamic site says no before any class is read"),
    "refimpl/layout/facts.py:125 core/NumberReplacer 20":
        (_LAYOUT_EQ + "test_a_dynamic_conv_s_placeholder_shape_decides_nothing",
         "a dynamic site says no before any class is read"),
    "refimpl/layout/facts.py:125 core/NumberReplacer 21":
        (_LAYOUT_EQ + "test_a_dynamic_conv_s_placeholder_shape_decides_nothing",
         "a dynamic site says no before any class is read"),
    "refimpl/layout/facts.py:125 core/NumberReplacer 22":
        (_LAYOUT_EQ + "test_a_dynamic_conv_s_placeholder_shape_decides_nothing",
         "a dynamic site says no before any class is read"),
    # shown after the first run of seed 2864908393 (answering seed 3620645976's survivors):
    "refimpl/checkpointing/debug.py:61 core/ReplaceComparisonOperator_Lt_NotEq 0":
        (_CHECKPOINT_EQ + "test_the_report_index_is_never_past_either_log",
         "first_difference's index is at most either log's length, so < and != agree"),
    "refimpl/checkpointing/debug.py:62 core/ReplaceComparisonOperator_Lt_NotEq 1":
        (_CHECKPOINT_EQ + "test_the_report_index_is_never_past_either_log",
         "first_difference's index is at most either log's length, so < and != agree"),
    "refimpl/flops/formulas/conv.py:36 core/ReplaceComparisonOperator_NotEq_Lt 0":
        (_FLOPS_EQ + "test_a_weight_of_lower_rank_than_the_input_is_refused_by_torch_first",
         "differs only where the input has more dims than the weight, which torch's "
         "convolution refuses before any formula runs"),
    "refimpl/cse/aliasing.py:29 core/ReplaceTrueWithFalse 0":
        (_CSE_EQ + "test_alias_facts_are_never_mutated_nor_hashed",
         "AliasFacts is never assigned, deleted or hashed: frozen changes nothing"),
    "refimpl/cse/aliasing.py:48 core/ReplaceComparisonOperator_IsNot_Gt 1":
        (_CSE_EQ + "test_path_compression_that_stops_early_finds_the_same_roots",
         "path compression that stops early leaves every root unchanged (all 5-node forests)"),
    "refimpl/cse/aliasing.py:48 core/ReplaceComparisonOperator_IsNot_Lt 1":
        (_CSE_EQ + "test_path_compression_that_stops_early_finds_the_same_roots",
         "path compression that stops early leaves every root unchanged (all 5-node forests)"),
    "refimpl/cse/effects.py:217 core/ReplaceComparisonOperator_NotEq_IsNot 0":
        (_CSE_EQ + "test_op_summary_kinds_are_interned_literals",
         "an op summary's kind is always one of five interned literals"),
    "refimpl/cse/effects.py:260 core/ReplaceOrWithAnd 8":
        (_CSE_EQ + "test_an_optional_dropout_is_found_alike_on_every_registered_op",
         "over every aten overload, where the two versions differ the op has no dropout_p"),
    "refimpl/cse/effects.py:296 core/ReplaceComparisonOperator_Is_Eq 3":
        (_CSE_EQ + "test_pure_builtins_compare_by_identity",
         "builtin functions and types compare by identity"),
    "refimpl/cse/eliminate.py:94 core/ReplaceUnaryOperator_USub_Not 0":
        (_CSE_EQ + "test_no_node_writes_or_reads_at_position_zero",
         "no write or read happens at position 0, so defaults of 0 and -1 compare alike"),
    "refimpl/cse/keys.py:59 core/ReplaceComparisonOperator_Is_Eq 6":
        (_CSE_EQ + "test_type_equality_is_identity",
         "types (bool and dict among them) compare by identity"),
    "refimpl/partition/options.py:26 core/ReplaceTrueWithFalse 0":
        (_PARTITION_EQ + "test_options_26_options_are_never_changed_nor_hashed",
         "nothing assigns, deletes or hashes a PartitionOptions: frozen changes nothing"),
    "refimpl/partition/problem.py:21 core/ReplaceTrueWithFalse 0":
        (_PARTITION_EQ + "test_problem_21_bans_are_never_changed_nor_hashed",
         "nothing assigns, deletes or hashes a Bans: frozen changes nothing"),
    # shown after the replay of seed 645565716 (a training sample, not a score; stop 41):
    "refimpl/partition/candidates.py:38 core/ReplaceTrueWithFalse 0":
        (_PARTITION_EQ + "test_candidates_38_an_item_is_never_changed_nor_hashed",
         "nothing assigns, deletes or hashes a knapsack Item: frozen changes nothing"),
    "refimpl/partition/cut.py:19 core/ReplaceTrueWithFalse 0":
        (_PARTITION_EQ + "test_cut_19_a_cut_is_never_changed_nor_hashed",
         "nothing assigns, deletes or hashes a Cut: frozen changes nothing"),
    # fx node ops are interned literals; the training sample drew cost.py:91, the others are
    # registered before any seed drew them (the equivalence is the mutant's own, whichever
    # sample draws it), each shown by the same test:
    **{key: (_PARTITION_EQ + "test_fx_node_ops_are_interned_literals_so_is_and_eq_agree",
             "fx node ops are interned literals: identity and equality agree")
       for key in (
           "refimpl/partition/cost.py:91 core/ReplaceComparisonOperator_NotEq_IsNot 0",
           "refimpl/partition/runtime.py:151 core/ReplaceComparisonOperator_NotEq_IsNot 0",
           "refimpl/partition/fx_edge.py:39 core/ReplaceComparisonOperator_Eq_Is 0",
           "refimpl/partition/fx_edge.py:80 core/ReplaceComparisonOperator_Eq_Is 2",
           "refimpl/partition/fx_edge.py:82 core/ReplaceComparisonOperator_Eq_Is 3",
           "refimpl/partition/fx_edge.py:107 core/ReplaceComparisonOperator_Eq_Is 4",
           "refimpl/partition/fx_edge.py:155 core/ReplaceComparisonOperator_Eq_Is 6",
           "refimpl/partition/fx_edge.py:235 core/ReplaceComparisonOperator_Eq_Is 8")},
    # roles are interned literals: seed 1446479928 drew cut.py:41; the others are registered
    # before any seed drew them, each shown by the same test:
    **{key: (_PARTITION_EQ + "test_roles_are_interned_literals_so_is_and_eq_agree",
             "roles are interned literals: identity and equality agree")
       for key in (
           "refimpl/partition/candidates.py:67 core/ReplaceComparisonOperator_Eq_Is 1",
           "refimpl/partition/candidates.py:70 core/ReplaceComparisonOperator_Eq_Is 2",
           "refimpl/partition/candidates.py:88 core/ReplaceComparisonOperator_Eq_Is 4",
           "refimpl/partition/candidates.py:107 core/ReplaceComparisonOperator_Eq_Is 5",
           "refimpl/partition/candidates.py:138 core/ReplaceComparisonOperator_NotEq_IsNot 0",
           "refimpl/partition/cut.py:41 core/ReplaceComparisonOperator_Eq_Is 0",
           "refimpl/partition/exact.py:83 core/ReplaceComparisonOperator_Eq_Is 0",
           "refimpl/partition/fx_edge.py:124 core/ReplaceComparisonOperator_Eq_Is 5",
           "refimpl/partition/fx_edge.py:235 core/ReplaceComparisonOperator_Eq_Is 9",
           "refimpl/partition/graph.py:78 core/ReplaceComparisonOperator_Eq_Is 0",
           "refimpl/partition/mincut.py:109 core/ReplaceComparisonOperator_Eq_Is 1",
           "refimpl/partition/mincut.py:126 core/ReplaceComparisonOperator_Eq_Is 2",
           "refimpl/partition/partitioner.py:92 core/ReplaceComparisonOperator_Eq_Is 0",
           "refimpl/partition/region.py:57 core/ReplaceComparisonOperator_Eq_Is 0")},
    # shown after the first run of seed 194876049, each by its test:
    "refimpl/partition/runtime.py:196 core/ReplaceComparisonOperator_Eq_LtE 0":
        (_PARTITION_EQ + "test_runtime_196_name_le_flops_is_name_eq_flops",
         "of the estimator names PartitionOptions accepts only 'flops' is <= 'flops'"),
    "refimpl/partition/fx_edge.py:174 core/ReplaceComparisonOperator_Eq_GtE 7":
        (_PARTITION_EQ + "test_fx_edge_174_role_ge_forward_prices_only_what_costs_nothing",
         "the other roles >= 'forward' are placeholders' and outputs', priced 0 by both "
         "estimators"),
    "refimpl/partition/partitioner.py:85 core/ReplaceComparisonOperator_Eq_GtE 0":
        (_PARTITION_EQ + "test_partitioner_85_budget_eq_one_is_budget_ge_one",
         "choose_many refuses budgets outside [0, 1], so == 1 and >= 1 agree on what "
         "reaches _solve"),
    "refimpl/partition/candidates.py:82 core/ReplaceComparisonOperator_Eq_Is 3":
        (_PARTITION_EQ + "test_candidates_82_role_is_forward_is_role_eq_forward",
         "roles are interned string literals: is and == agree"),
    # shown after the first run of seed 553120032 (answering seed 2864908393's survivors):
    "refimpl/flops/models.py:117 core/ReplaceComparisonOperator_Gt_GtE 1":
        (_FLOPS_EQ + "test_no_input_size_in_bytes_equals_the_storage_bound",
         "the bound 2**63-1 is odd and every --dtype's element size is even: never equal"),
    "refimpl/flops/free_ops.py:127 core/RemoveDecorator 0":
        (_FLOPS_EQ + "test_the_tag_rule_is_a_pure_function_of_the_packet",
         "with or without @cache the tag rule answers alike for every aten packet"),
    "refimpl/flops/counter.py:211 core/ReplaceComparisonOperator_Is_Eq 0":
        (_FLOPS_EQ + "test_dispatched_ops_compare_equal_only_to_themselves",
         "no OpOverload or higher-order op class defines __eq__: == is identity"),
    "refimpl/flops/module_tracker.py:78 core/ReplaceComparisonOperator_Gt_NotEq 0":
        (_FLOPS_EQ + "test_a_module_is_never_active_a_negative_number_of_times",
         "over every enter/leave sequence up to length 8 the count is never negative: > 0 "
         "and != 0 agree"),
    "refimpl/flops/formulas/registry.py:158 core/ExceptionReplacer 0":
        (_FLOPS_EQ + "test_every_kernel_the_table_names_exists_so_present_never_skips",
         "on the installed torch every kernel the table names exists: the handler never "
         "runs"),
    "refimpl/cse/effects.py:166 core/ReplaceComparisonOperator_Eq_GtE 0":
        (_CSE_EQ + "test_only_call_module_sorts_at_or_after_call_module",
         "of call_function, call_method and call_module only call_module is >= "
         "'call_module'"),
    "refimpl/cse/effects.py:217 core/ReplaceComparisonOperator_NotEq_Lt 1":
        (_CSE_EQ + "test_an_optional_dropout_belongs_to_a_random_op",
         "every op with an optional dropout is random; < and != differ only for "
         "side_effect and uninitialized"),
    "refimpl/partition/exhaustive.py:31 core/ReplaceComparisonOperator_Eq_LtE 0":
        (_PARTITION_EQ + "test_exhaustive_31_and_candidates_82_role_le_forward_is_role_eq_forward",
         "forward_side yields roles primal and forward only, where <= and == agree"),
    "refimpl/partition/candidates.py:82 core/ReplaceComparisonOperator_Eq_LtE 3":
        (_PARTITION_EQ + "test_exhaustive_31_and_candidates_82_role_le_forward_is_role_eq_forward",
         "forward_side yields roles primal and forward only, where <= and == agree"),
    "refimpl/partition/mincut.py:108 core/ReplaceComparisonOperator_IsNot_NotEq 0":
        (_PARTITION_EQ + "test_mincut_108_owner_ne_node_is_owner_is_not_node",
         "JointNode equality is dataclass equality, and one graph's node names are unique: "
         "!= on its nodes is identity"),
    "refimpl/layout/ops.py:59 core/ReplaceComparisonOperator_Eq_LtE 0":
        (_LAYOUT_EQ + "test_call_function_and_call_method_are_the_least_node_ops",
         "'call_function' is the least FX node op: <= holds for it alone"),
    "refimpl/layout/ops.py:66 core/ReplaceComparisonOperator_Eq_LtE 2":
        (_LAYOUT_EQ + "test_call_function_and_call_method_are_the_least_node_ops",
         "past the call_function branch 'call_method' is the least op left"),
    # shown after the first run of seed 553120032 (answering its partition survivors):
    "refimpl/partition/candidates.py:124 core/ReplaceComparisonOperator_Eq_Is 6":
        (_PARTITION_EQ + "test_candidates_124_role_is_forward_is_role_eq_forward",
         "roles are interned string literals: is and == agree"),
    "refimpl/partition/candidates.py:138 core/ReplaceComparisonOperator_NotEq_Gt 0":
        (_PARTITION_EQ + "test_candidates_138_role_gt_forward_is_role_ne_forward",
         "the forward side holds the roles primal and forward only, where > and != agree"),
    "refimpl/partition/fx_edge.py:39 core/ReplaceComparisonOperator_Eq_GtE 0":
        (_PARTITION_EQ + "test_fx_edge_39_and_107_op_ge_placeholder_is_op_eq_placeholder",
         "of fx's node ops only 'root' sorts above 'placeholder', and no graph yields it"),
    "refimpl/partition/fx_edge.py:107 core/ReplaceComparisonOperator_Eq_GtE 4":
        (_PARTITION_EQ + "test_fx_edge_39_and_107_op_ge_placeholder_is_op_eq_placeholder",
         "of fx's node ops only 'root' sorts above 'placeholder', and no graph yields it"),
    "refimpl/partition/mincut.py:95 core/NumberReplacer 30":
        (_PARTITION_EQ + "test_mincut_95_level_ge_one_is_level_ge_zero_off_the_source",
         "only the source has level 0, and it is numbered after every node's vertices"),
    "refimpl/partition/region.py:52 core/ReplaceComparisonOperator_Gt_NotEq 0":
        (_PARTITION_EQ + "test_region_52_len_ne_one_is_len_gt_one_past_the_empty_case",
         "the empty case returns first: != 1 and > 1 agree on what reaches the line"),
    # shown after the first run of seed 2259820631 (answering seed 553120032's survivors):
    "refimpl/cse/effects.py:68 core/ReplaceTrueWithFalse 0":
        (_CSE_EQ + "test_effects_are_never_changed_nor_hashed",
         "nothing sets, deletes or hashes an Effect: frozen changes nothing"),
    "refimpl/cse/effects.py:235 core/ReplaceUnaryOperator_Delete_USub 0":
        (_CSE_EQ + "test_every_schema_name_has_one_namespace_separator",
         "every schema name has two parts, so [1] is [-1]"),
    "refimpl/cse/eliminate.py:94 core/NumberReplacer 1":
        (_CSE_EQ + "test_no_node_writes_or_reads_at_position_zero",
         "no node writes or reads at position 0: defaults of 0 and -1 compare alike"),
    "refimpl/cse/eliminate.py:95 core/ReplaceComparisonOperator_IsNot_Lt 0":
        (_CSE_EQ + "test_a_storage_class_joins_an_earlier_one",
         "a class's parent is itself or an earlier node: < is is not"),
    "refimpl/cse/eliminate.py:187 core/ReplaceComparisonOperator_IsNot_LtE 3":
        (_CSE_EQ + "test_the_result_is_a_fixpoint",
         "the pass's result is a fixpoint: the mutant only adds passes over it"),
    "refimpl/cse/eliminate.py:190 core/NumberReplacer 4":
        (_CSE_EQ + "test_write_versions_are_compared_only_for_equality",
         "versions are compared only for equality: doubling keeps it"),
    "refimpl/cse/eliminate.py:191 core/ReplaceComparisonOperator_IsNot_NotEq 4":
        (_CSE_EQ + "test_node_inequality_is_identity",
         "fx.Node equality is identity: != is is not"),
    "refimpl/flops/free_ops.py:124 core/NumberReplacer 1":
        (_FLOPS_EQ + "test_no_op_name_holds_a_dot",
         "no op name has a dot: [0] is [-1]"),
    "refimpl/flops/summary.py:36 core/ReplaceTrueWithFalse 1":
        (_FLOPS_EQ + "test_a_counted_run_is_never_changed_nor_hashed",
         "nothing sets, deletes or hashes a Counted: frozen changes nothing"),
}

#: What the fork server imports before forking (never refimpl: the children import the mutant).
PRELOADED = ("torch", "torch.fx", "torch._dynamo", "numpy", "scipy")

#: What the work folder holds: each path of the checkout (key) at its place there (value). The
#: property suite goes where the wheel installs it, inside refimpl/: the children import
#: refimpl.properties from the work folder, with the mutated package.
COPIED = {"refimpl": "refimpl", "properties": "refimpl/properties", "conftest.py": "conftest.py",
          "pyproject.toml": "pyproject.toml", "setup.cfg": "setup.cfg",
          "benchmarks": "benchmarks", "tests": "tests"}
#: what the client prints for a mutant no target property executes
NOT_EXECUTED = "no target property executes the mutated statement"
#: what the client prints for a mutant that changed only annotations (never evaluated)
ANNOTATION_ONLY = "equivalent by construction: only an annotation changed"
#: per-test line coverage of the unmutated suite (:mod:`mutation_select`), in the work folder
COVERAGE = "coverage.json"
#: the unmutated copies of the mutated modules, in the work folder
PRISTINE = "pristine"
#: the equivalence tests' verdicts (:func:`equivalence_verdicts`), in the work folder:
#: mutant key -> "demonstrated" or "not demonstrated: ..."
EQUIVALENCE_VERDICTS = "equivalence_verdicts.json"
#: what cosmic-ray records as the output of a mutant whose suite ran past the timeout
TIMEOUT = "timeout"
#: the verdict of an equivalence test that passed
DEMONSTRATED = "demonstrated"


@dataclass(frozen=True)
class Mutant:
    """One sampled mutant and what the killing suite made of it."""

    job_id: str
    path: str
    line: int
    operator: str
    occurrence: int
    outcome: str  # killed, survived, incompetent, pending
    executed: bool = True  # False: no target property executes the mutated statement
    annotation_only: bool = False  # equivalent by construction (ANNOTATION_ONLY)
    timed_out: bool = False  # killed by running past the per-mutant timeout

    @property
    def key(self) -> str:
        return f"{self.path}:{self.line} {self.operator} {self.occurrence}"


@dataclass(frozen=True)
class Score:
    """A component's figures: killed / (killed + survived - equivalent), with its interval."""

    component: str
    sampled: int
    killed: int
    survived: int
    equivalent: int
    incompetent: int
    seconds: float
    timed_out: int = 0  # of the killed, those killed by the timeout

    @property
    def live(self) -> int:
        """The mutants the score is over: killed, or survived and not shown equivalent."""
        return self.killed + self.survived - self.equivalent

    @property
    def score(self) -> float:
        return self.killed / self.live if self.live else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% Wilson score interval of :attr:`score` (NaNs with no live mutant)."""
        return wilson_interval(self.killed, self.live) if self.live else (math.nan, math.nan)


def pytest_collection_modifyitems(config, items):
    """As a pytest plugin (``-p mutation_score``): keep only target properties, the tests
    that take the ``refimpl_backend`` fixture."""
    keep = [item for item in items if "refimpl_backend" in getattr(item, "fixturenames", ())]
    dropped = [item for item in items if item not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def pytest_configure(config):
    """As a pytest plugin: in the baseline run (``MUTATION_TRACE`` names the component),
    trace the lines each test executes (:class:`mutation_select.LineTracer`)."""
    component = os.environ.get("MUTATION_TRACE")
    if component:
        work = Path.cwd()
        config.pluginmanager.register(LineTracer(work, MODULES[component], work / COVERAGE))


def killing_args(work: Path, component: str) -> list[str]:
    """pytest's arguments for the component's killing suite (paths relative to ``work``)."""
    files = sorted(p.relative_to(work).as_posix()
                   for p in (work / "refimpl" / "properties").glob(f"test_{component}*.py"))
    if not files:
        raise SystemExit(f"component={component!r}: no refimpl/properties/test_{component}*.py")
    return ["-x", "-q", "-p", "no:cacheprovider", "-p", "mutation_score",
            "--refimpl-target", "refimpl", *files]


def killing_command(work: Path, component: str, sock: Path, deselect: list[str]) -> str:
    extra = [arg for nodeid in deselect for arg in ("--deselect", nodeid)]
    return (f"{sys.executable} {Path(__file__).resolve()} --client {sock} -- "
            + " ".join(killing_args(work, component) + extra))


def baseline_failures(work: Path, component: str, sock: Path) -> list[str]:
    """Run the killing suite on the unmutated copy, tracing each test's lines into
    ``COVERAGE``; the node ids of the target properties that fail there (a mutant cannot be
    judged by a property that fails without it)."""
    args = [a for a in killing_args(work, component) if a != "-x"] + ["-rf"]
    env = dict(environment(work), MUTATION_TRACE=component)
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--client", str(sock),
                          "--", *args], cwd=work, env=env, capture_output=True,
                         text=True).stdout
    failed = sorted({line.split()[1] for line in out.splitlines()
                     if line.startswith(("FAILED ", "ERROR ")) and "::" in line})
    (work / "baseline.txt").write_text(
        (out.strip().splitlines() or ["(no output)"])[-1] + "\n"
        + "".join(f"deselected (fails unmutated): {f}\n" for f in failed))
    return failed


# --- the fork server: torch imported once, refimpl imported fresh per mutant ----------------

def serve(sock: Path) -> None:
    """Accept one request at a time: ``{"cwd", "args", "env", "log"}``; fork; the child runs
    ``pytest.main(args)`` in ``cwd`` with its output in ``log``; reply with its exit code. A
    client that disconnects (cosmic-ray's timeout killed it) gets its child killed."""
    for name in PRELOADED:
        importlib.import_module(name)
    assert not any(name.startswith("refimpl") for name in sys.modules), "refimpl preloaded"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock))
    server.listen(1)
    while True:
        conn, _ = server.accept()
        with conn:
            request = json.loads(conn.makefile().readline())
            pid = os.fork()
            if pid == 0:
                server.close()
                _run_child(request)
            code = _wait_or_kill(pid, conn)
            if code is not None:
                conn.sendall(f"{code}\n".encode())


def _run_child(request: dict) -> None:
    os.setpgid(0, 0)
    sys.dont_write_bytecode = True
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[:0] = [request["cwd"], os.path.join(request["cwd"], "benchmarks")]
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    code = 3
    try:
        import pytest
        code = int(pytest.main(request["args"]))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait_or_kill(pid: int, conn: socket.socket) -> int | None:
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) % 256
        readable, _, _ = select.select([conn], [], [], 0.2)
        if readable and not conn.recv(1):  # the client is gone: stop its suite
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None


def killing_tests(work: Path, args: list[str]) -> list[str] | str | None:
    """The pytest arguments for the mutant now in ``work``: the suite's files replaced by the
    tests that executed the mutated statement (:func:`mutation_select.select_tests`), fastest
    first; None when no test did (it survives without a run); :data:`ANNOTATION_ONLY` when
    only an annotation changed (equivalent by construction). Before the baseline's coverage
    exists (the baseline itself), ``args`` unchanged."""
    coverage_file = work / COVERAGE
    if not coverage_file.exists():
        return args
    coverage = json.loads(coverage_file.read_text())
    mutated = [p.relative_to(work / PRISTINE).as_posix()
               for p in sorted((work / PRISTINE).rglob("*.py"))
               if p.read_text() != (work / p.relative_to(work / PRISTINE)).read_text()]
    if len(mutated) != 1:
        raise SystemExit(f"expected one mutated module in {work}, found {mutated}")
    path = mutated[0]
    pristine, mutant = (work / PRISTINE / path).read_text(), (work / path).read_text()
    if only_annotations(pristine, mutant):
        return ANNOTATION_ONLY
    tests = select_tests(coverage, path, pristine, mutant)
    if tests == [EVERY_TEST]:
        seconds = coverage["seconds"]
        tests = sorted(seconds, key=lambda test: (seconds[test], test))
    if not tests:
        return None
    return [a for a in args if not a.endswith(".py")] + tests


def client(sock: Path, args: list[str]) -> int:
    """The test command cosmic-ray runs: ask the fork server to run pytest here, on the
    tests that can kill the mutant (:func:`killing_tests`)."""
    selected = killing_tests(Path.cwd(), args)
    if selected is None or selected == ANNOTATION_ONLY:
        print(f"{selected or NOT_EXECUTED}: survived without a run")
        return 0
    with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(sock))
        keep = ("CI", "OMP_NUM_THREADS", "HYPOTHESIS_PROFILE", "REFIMPL_TARGET",
                "MUTATION_TRACE")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        conn.sendall((json.dumps({"cwd": os.getcwd(), "args": selected, "env": env,
                                  "log": log.name}) + "\n").encode())
        reply = conn.makefile().readline()
        print(log.read()[-20000:])
        return int(reply) if reply.strip() else 3


def start_server(work: Path) -> tuple[subprocess.Popen, Path]:
    sock = work / "forkserver.sock"
    sock.unlink(missing_ok=True)
    server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve",
                               str(sock)], env=environment(work), cwd=work)
    while not sock.exists():
        if server.poll() is not None:
            raise SystemExit(f"the fork server exited with {server.returncode}")
        time.sleep(0.5)
    return server, sock


def copy_tree(work: Path, component: str) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for name, place in COPIED.items():
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / place, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, work / place)
    for path in MODULES[component]:
        (work / PRISTINE / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(work / path, work / PRISTINE / path)


def write_config(work: Path, component: str, timeout: float, sock: Path,
                 deselect: list[str]) -> Path:
    config = work / f"cosmic-ray-{component}.toml"
    modules = ", ".join(f'"{m}"' for m in MODULES[component])
    excluded = ", ".join(f"'{e}'" for e in EXCLUDED_OPERATORS)
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = [{modules}]\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = \"{killing_command(work, component, sock, deselect)}\"\n\n"
        "[cosmic-ray.distributor]\nname = \"local\"\n\n"
        f"[cosmic-ray.filters.operators-filter]\nexclude-operators = [{excluded}]\n")
    return config


def environment(work: Path) -> dict[str, str]:
    env = dict(os.environ, CI="true", OMP_NUM_THREADS="1", HYPOTHESIS_PROFILE="ci",
               REFIMPL_TARGET="refimpl")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPATH", None)  # the server imports no refimpl; its children add the copy
    return env


def cosmic_ray(work: Path, *args: str) -> None:
    exe = Path(sys.executable).with_name("cosmic-ray")
    subprocess.run([str(exe), *args], cwd=work, env=environment(work), check=True)


def stratified(keys: list[str], size: int, seed: int) -> set[int]:
    """Indices of a seeded sample of ``size`` items, each item keyed by its module: every
    module first gets ``size // (2 * modules)`` of its items (at least one), the rest of the
    sample is drawn from all items left. So every module of a component is mutated (a small
    one, such as a solver, is not left to chance) and most of the sample stays uniform.
    Invariant: the same keys, size and seed give the same indices."""
    rng = random.Random(seed)
    modules = sorted(set(keys))
    floor = max(1, size // (2 * len(modules))) if modules else 0
    chosen: set[int] = set()
    for module in modules:
        own = [i for i, key in enumerate(keys) if key == module]
        chosen.update(rng.sample(own, min(floor, len(own), size - len(chosen))))
    rest = [i for i in range(len(keys)) if i not in chosen]
    chosen.update(rng.sample(rest, min(size - len(chosen), len(rest))))
    return chosen


def sample(db_path: Path, size: int, seed: int) -> int:
    """Mark every pending mutant outside the seeded sample (:func:`stratified`, over the
    mutants sorted by file, position and operator) as skipped; the sample's size."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(db_path), WorkDB.Mode.open) as db:
        pending = sorted(db.pending_work_items, key=lambda item: (
            str(item.mutations[0].module_path), item.mutations[0].start_pos,
            item.mutations[0].operator_name, item.mutations[0].occurrence))
        keys = [Path(item.mutations[0].module_path).as_posix() for item in pending]
        chosen = {pending[i].job_id for i in stratified(keys, size, seed)}
        for item in pending:
            if item.job_id not in chosen:
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                      output="not in the sample"))
        return len(chosen)


def _value(outcome) -> str:
    return str(getattr(outcome, "value", outcome))


def mutants(db_path: Path) -> list[Mutant]:
    from cosmic_ray.work_db import WorkDB, use_db

    found = []
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == "skipped":
                continue
            spec, output = item.mutations[0], result.output or ""
            outcome = _value(result.test_outcome or result.worker_outcome)
            found.append(Mutant(item.job_id, Path(spec.module_path).as_posix(),
                                spec.start_pos[0], spec.operator_name, spec.occurrence,
                                outcome, NOT_EXECUTED not in output, ANNOTATION_ONLY in output,
                                outcome == "killed" and output.strip() == TIMEOUT))
    return sorted(found, key=lambda m: (m.path, m.line, m.operator, m.occurrence))


def score(component: str, found: list[Mutant], seconds: float,
          verdicts: dict[str, str]) -> Score:
    """The figures of ``found``; ``verdicts``: :func:`equivalence_verdicts`' of the
    survivors. A survivor is equivalent when only an annotation changed, or when its
    equivalence test passed in this run; every other survivor counts against the score."""
    count = lambda outcome: sum(m.outcome == outcome for m in found)
    equivalent = sum(m.outcome == "survived" and (
        m.annotation_only or verdicts.get(m.key) == DEMONSTRATED) for m in found)
    return Score(component, len(found), count("killed"), count("survived"), equivalent,
                 len(found) - count("killed") - count("survived"), seconds,
                 sum(m.timed_out for m in found))


def mutant_keys(path: Path, root: Path = ROOT) -> set[str]:
    """Every mutant key (``path:line operator occurrence``, as :class:`Mutant` writes it) that
    ``cosmic-ray init`` makes of the module ``path`` (relative to ``root``): the keys a run
    of today's tree can report. Occurrences count every position of an operator in the
    module, as cosmic-ray numbers them before its operator filter drops any."""
    try:
        init_module = importlib.import_module("cosmic_ray.commands.init")
    except ModuleNotFoundError as missing:
        raise SystemExit("the mutation score needs cosmic-ray: pip install -e '.[mutation]'"
                         ) from missing
    with contextlib.chdir(root):
        items = list(init_module._all_work_items([path], {}))
    return {f"{Path(m.module_path).as_posix()}:{m.start_pos[0]} {m.operator_name} {m.occurrence}"
            for item in items for m in item.mutations}


def stale_equivalents(table: dict[str, tuple[str, str]], root: Path = ROOT) -> list[str]:
    """The entries of an equivalence table whose key names no mutant of today's tree: the
    code moved (a line or an occurrence number changed) and the entry must be re-checked."""
    keys_of: dict[str, set[str]] = {}
    stale = []
    for key in table:
        path = key.split(":")[0]
        if path not in keys_of:
            exists = (root / path).is_file()
            keys_of[path] = mutant_keys(Path(path), root) if exists else set()
        if key not in keys_of[path]:
            stale.append(f"{key}: no such mutant in today's {path} (the code moved?)")
    return stale


def check_equivalents(table: dict[str, tuple[str, str]]) -> None:
    """Refuse to run when an :data:`EQUIVALENT` entry names no test that exists, or names a
    mutant today's tree does not have."""
    refused = equivalents_without_a_test(table, ROOT) + stale_equivalents(table)
    if refused:
        raise SystemExit("EQUIVALENT: an equivalent needs a test that demonstrates it, on a "
                         "mutant of today's tree:\n  "
                         + "\n  ".join(refused))


def equivalence_verdicts(work: Path, found: list[Mutant]) -> dict[str, str]:
    """For each survivor listed in :data:`EQUIVALENT`: its test run on a fresh copy of the
    work folder's unmutated tree, :data:`DEMONSTRATED` when it passes, else why not.
    Written to :data:`EQUIVALENCE_VERDICTS`."""
    verdicts: dict[str, str] = {}
    for m in found:
        if m.outcome == "survived" and m.key in EQUIVALENT:
            test = EQUIVALENT[m.key][0]
            verdicts[m.key] = unit_test_verdict(work, test)
            print(f"[equivalence test] {m.key}: {verdicts[m.key]}", flush=True)
    (work / EQUIVALENCE_VERDICTS).write_text(json.dumps(verdicts, indent=1) + "\n")
    return verdicts


def unit_test_verdict(work: Path, test: str) -> str:
    """:data:`DEMONSTRATED` when ``test`` passes in a fresh copy of ``work``'s (unmutated)
    tree with nothing skipped or xfailed (a skip shows nothing: on the release that skips,
    the mutant may differ), else why not."""
    run = unit_test_run(work, test)
    summary = run.stdout.decode(errors="replace").strip().splitlines()[-1:] or [""]
    if run.returncode != 0:
        return f"not demonstrated: pytest exit {run.returncode} ({test})"
    if "skipped" in summary[0] or "xfail" in summary[0]:
        return f"not demonstrated: {summary[0]} ({test})"
    return DEMONSTRATED


def unit_test_run(work: Path, test: str) -> subprocess.CompletedProcess:
    """pytest run on ``test`` in a fresh copy of ``work``'s (unmutated) tree."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp)
        for place in COPIED.values():  # refimpl/properties comes with refimpl/ and again
            src = work / place
            if src.is_dir():
                shutil.copytree(src, copy / place, dirs_exist_ok=True)
            elif src.exists():
                shutil.copy2(src, copy / place)
        env = dict(environment(copy), PYTHONPATH=str(copy))
        return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p",
                               "no:cacheprovider", test], cwd=copy, env=env,
                              capture_output=True)


def run_component(component: str, work_root: Path, size: int, seed: int,
                  timeout: float, jobs: int) -> dict:
    """Sample, run and score one component (module docstring, steps 1-6): its record for the
    run's JSON (:func:`component_record`)."""
    work = work_root / component
    copy_tree(work, component)
    start = time.monotonic()
    server, sock = start_server(work)
    try:
        deselect = baseline_failures(work, component, sock)
    finally:
        server.terminate()
        server.wait()
    baseline_seconds = time.monotonic() - start
    timeout = max(timeout, 2 * baseline_seconds)
    print(f"[{component}] baseline ({baseline_seconds:.0f} s): "
          f"{(work / 'baseline.txt').read_text().strip()}; timeout {timeout:.0f} s a mutant",
          flush=True)
    config = write_config(work, component, timeout, sock, deselect)
    db = work / "session.sqlite"
    cosmic_ray(work, "init", config.name, db.name)
    exe = Path(sys.executable).with_name("cr-filter-operators")
    subprocess.run([str(exe), db.name, config.name], cwd=work, check=True)
    sampled = sample(db, size, seed)
    estimate = estimated_seconds(SECONDS_PER_MUTANT[component], sampled, jobs)
    print(f"[{component}] {sampled} mutants sampled (seed {seed}); {jobs} shard(s); "
          f"estimated wall {estimate / 60:.0f} min", flush=True)
    shards = make_shards(work, component, jobs, timeout, deselect)
    with ThreadPoolExecutor(max_workers=len(shards) or 1) as pool:
        list(pool.map(lambda shard: exec_shard(shard, component), shards))
    merge_shards(db, shards)
    for shard in shards:
        shutil.rmtree(shard)
    found = mutants(db)
    verdicts = equivalence_verdicts(work, found)
    figures = score(component, found, time.monotonic() - start, verdicts)
    return component_record(figures, found, verdicts, estimate, timeout,
                            (work / "baseline.txt").read_text().strip())


def component_record(s: Score, found: list[Mutant], verdicts: dict[str, str],
                     estimate: float, timeout: float, baseline: str) -> dict:
    """One component's entry in the run's JSON: the figures, and every mutant."""
    low, high = s.interval
    return {"modules": MODULES[s.component], "sampled": s.sampled, "killed": s.killed,
            "survived": s.survived, "equivalent": s.equivalent,
            "incompetent": s.incompetent, "timed_out": s.timed_out, "score": s.score,
            "interval_95": [low, high], "seconds": round(s.seconds),
            "estimated_seconds": round(estimate), "timeout": round(timeout),
            "baseline": baseline,
            "mutants": [{"key": m.key, "outcome": m.outcome, "executed": m.executed,
                         "annotation_only": m.annotation_only, "timed_out": m.timed_out,
                         "equivalence": verdicts.get(m.key)} for m in found]}


def make_shards(work: Path, component: str, jobs: int, timeout: float,
                deselect: list[str]) -> list[Path]:
    """Split the sample's pending mutants into up to ``jobs`` shards, dealt round-robin in
    the session's order: each shard is a copy of the work folder (its own tree, fork server
    and session database) in which the other shards' mutants are marked skipped."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(work / "session.sqlite"), WorkDB.Mode.open) as db:
        pending = sorted(item.job_id for item in db.pending_work_items)
    owned = [pending[i::jobs] for i in range(min(jobs, len(pending)))]
    shards = []
    for i, jobs_of_shard in enumerate(owned):
        shard = work.with_name(f"{work.name}.shard{i}")
        if shard.exists():
            shutil.rmtree(shard)
        shutil.copytree(work, shard, ignore=shutil.ignore_patterns("forkserver.sock"))
        write_config(shard, component, timeout, shard / "forkserver.sock", deselect)
        with use_db(str(shard / "session.sqlite"), WorkDB.Mode.open) as db:
            for job in set(pending) - set(jobs_of_shard):
                db.set_result(job, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                              output="in another shard"))
        shards.append(shard)
    return shards


def exec_shard(shard: Path, component: str) -> None:
    """``cosmic-ray exec`` in one shard, beside its own fork server."""
    server, _ = start_server(shard)
    try:
        cosmic_ray(shard, "exec", f"cosmic-ray-{component}.toml", "session.sqlite")
    finally:
        server.terminate()
        server.wait()


def merge_shards(db_path: Path, shards: list[Path]) -> None:
    """Copy each shard's results for its own mutants into the session at ``db_path``."""
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(db_path), WorkDB.Mode.open) as db:
        for shard in shards:
            with use_db(str(shard / "session.sqlite"), WorkDB.Mode.open) as part:
                for item, result in part.completed_work_items:
                    if result.output != "in another shard" and \
                            result.worker_outcome != "skipped":
                        db.set_result(item.job_id, result)
        left = [item.job_id for item in db.pending_work_items]
    if left:
        raise SystemExit(f"{db_path}: {len(left)} sampled mutants have no result after "
                         f"the shards ran (see the shards' output): {left}")


def run_header(seed: int, drawn: bool, jobs: int) -> dict:
    """The run's JSON before any component: the seed, the commit, the property files that
    differ from it, and whether the run is a first run (:func:`mutation_protocol.first_run`)."""
    try:
        commit = head_commit(ROOT)
        changed = properties_changed(ROOT, commit)
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"{ROOT}: the score records a commit: run it from a git checkout "
                         f"({error})") from error
    return {"seed": seed, "seed_drawn": drawn, "commit": commit,
            "properties_changed": changed, "first_run": first_run(drawn, changed),
            "jobs": jobs, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "components": {}}


def report(run: dict) -> None:
    """Print a run's JSON as a table, then its first-run status and every survivor."""
    print(f"\n{'component':<11} {'sampled':>7} {'killed':>6} {'survived':>8} {'equiv':>5} "
          f"{'incomp':>6} {'score':>6} {'95% interval':>13} {'time':>7} {'estim.':>7}")
    for name, c in run["components"].items():
        low, high = c["interval_95"]
        print(f"{name:<11} {c['sampled']:>7} {c['killed']:>6} {c['survived']:>8} "
              f"{c['equivalent']:>5} {c['incompetent']:>6} {c['score']:>6.0%} "
              f"{low:>6.0%}-{high:<6.0%} {c['seconds']:>6}s {c['estimated_seconds']:>6}s")
    print(f"seed {run['seed']} at {run['commit'][:12]}: " + (
        "first run" if run["first_run"] else "NOT a first run (" + (
            "a replay of a given seed" if not run["seed_drawn"] else
            "property files differ from the commit: " + ", ".join(
                run["properties_changed"])) + ")"))
    for name, c in run["components"].items():
        print(f"  baseline [{name}] " + c["baseline"].replace(
            "\n", f"\n  baseline [{name}] "))
        if c["timed_out"]:
            print(f"  [{name}] {c['timed_out']} of the killed ran past the "
                  f"{c['timeout']} s timeout")
        for m in c["mutants"]:
            if m["outcome"] == "survived":
                mark = (" (equivalent: only an annotation)" if m["annotation_only"] else "") \
                    + (f" (equivalence test: {m['equivalence']})" if m["equivalence"]
                       else "") + ("" if m["executed"] else f" ({NOT_EXECUTED})")
                print(f"  survivor [{name}] {m['key']}{mark}")


def parser() -> argparse.ArgumentParser:
    """The command line (also read by tests/test_mutation_score.py to check the workflow)."""
    parse = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parse.add_argument("--component", default=",".join(MODULES),
                       help=f"comma-separated, of {', '.join(MODULES)}")
    parse.add_argument("--sample", type=int, default=None,
                       help="mutants per component (default: "
                            + ", ".join(f"{c} {n}" for c, n in DEFAULT_SAMPLE.items()) + ")")
    parse.add_argument("--seed", type=int, default=None,
                       help="replay this seed (default: a fresh one; a replay is not a "
                            "first run)")
    parse.add_argument("--timeout", type=float, default=60.0,
                       help="the least seconds a mutant may run; each component's timeout "
                            "is the larger of this and twice its (traced) baseline's wall: "
                            "a mutant past it is killed (cosmic-ray's rule: a hang)")
    parse.add_argument("--jobs", type=int, default=1,
                       help="mutants run side by side (the components run one after "
                            "another, each split into this many shards)")
    parse.add_argument("--work", type=Path, default=ROOT / ".mutation",
                       help="work folder (copies of the tree, cosmic-ray sessions)")
    parse.add_argument("--json", type=Path, default=None,
                       help="the run's record (default: WORK/mutation-score.json)")
    parse.add_argument("--report", action="store_true",
                       help="only print the figures of the finished run in --json")
    parse.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parse.add_argument("--client", type=Path, help=argparse.SUPPRESS)
    parse.add_argument("pytest_args", nargs="*", help=argparse.SUPPRESS)
    return parse


def main(argv: list[str] | None = None) -> int:
    parse = parser()
    args = parse.parse_args(argv)
    if args.serve:
        serve(args.serve)
    if args.client:
        return client(args.client, args.pytest_args)
    components = [c for c in args.component.split(",") if c]
    unknown = [c for c in components if c not in MODULES]
    if unknown or not components:
        parse.error(f"--component={args.component!r}: each must be one of {', '.join(MODULES)}")
    if args.jobs < 1 or (args.sample is not None and args.sample < 1):
        parse.error(f"--jobs={args.jobs}, --sample={args.sample}: each must be >= 1")
    record = args.json or args.work / "mutation-score.json"
    if args.report:
        if not record.exists():
            parse.error(f"--json={record}: no finished run there")
        report(json.loads(record.read_text()))
        return 0
    check_equivalents(EQUIVALENT)
    seed, drawn = draw_seed(args.seed)
    print(f"seed {seed} ({'drawn for this run' if drawn else 'given: a replay'})", flush=True)
    run = run_header(seed, drawn, args.jobs)
    record.parent.mkdir(parents=True, exist_ok=True)
    for component in components:
        size = args.sample or DEFAULT_SAMPLE[component]
        run["components"][component] = run_component(component, args.work, size, seed,
                                                     args.timeout, args.jobs)
        record.write_text(json.dumps(run, indent=1) + "\n")
    report(run)
    print(f"written: {record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
