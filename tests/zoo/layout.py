"""Channels-last layout bugs from torch's tracker (inductor's layout optimisation),
re-planted in refimpl's layout pass.

Each backend runs :func:`refimpl.layout.optimize_layout` with one step replaced, for the
duration of the call, by what the historical code did (``unittest.mock.patch`` on the names
the pass looks up). The rewritten graph keeps the helpers it was built with.
"""

from __future__ import annotations

from unittest import mock

import torch

import refimpl.layout as layout_package
from refimpl.layout import optimize_layout, plan, rewrite

_REAL_PLAN = layout_package.plan_layout


class _PlantedLayout:
    """refimpl's layout pass with ``patches()`` in force while it rewrites the graph."""

    component = "layout"

    def patches(self) -> list:
        raise NotImplementedError

    def optimize_layout(self, gm, example_inputs):
        patches = self.patches()
        for patch in patches:
            patch.start()
        try:
            return optimize_layout(gm, example_inputs)
        finally:
            for patch in reversed(patches):
                patch.stop()


def _outputs_left_as_computed(graph, nodes, strides, layout_plan) -> None:
    return None


class ChannelsLastOutputsLayout(_PlantedLayout):
    """pytorch/pytorch#197514, "[Inductor][ROCm] force_layout_optimization changes
    user-visible conv2d backward grad_input strides".

    Under layout optimisation a user-visible tensor came back channels-last where eager
    returns it contiguous (values right, strides not). Planted: graph outputs are not
    restored to eager's strides. Caught by test_layout.py's
    ``test_inference_outputs_match_eager``.
    """

    name = "zoo:layout-channels-last-outputs"
    issue = "pytorch/pytorch#197514"
    title = ("[Inductor][ROCm] force_layout_optimization changes user-visible conv2d backward "
             "grad_input strides")
    catcher = "test_layout::test_inference_outputs_match_eager"

    def patches(self) -> list:
        return [mock.patch.object(rewrite, "_restore_outputs", _outputs_left_as_computed)]


def _every_class_plain(node_facts) -> set[str]:
    return {f.alias_root for f in node_facts if f.alias_root is not None}


def _as_strided_takes_any_layout(node_facts):
    """The plan, but an ``as_strided`` reads its input as it is (no restore before it)."""
    layout_plan = _REAL_PLAN(node_facts)
    strided = {f.name for f in node_facts if f.name.startswith("as_strided")}
    layout_plan.restore_before = [(value, consumer) for value, consumer
                                  in layout_plan.restore_before if consumer not in strided]
    return layout_plan


class ViewsReadChannelsLastLayout(_PlantedLayout):
    """pytorch/pytorch#92063, "inductor: make as_strided support non-contiguous input and
    always fix it's input layout using eager stride".

    ``as_strided`` of a value the layout pass had made channels-last read that value's
    memory with eager's strides in mind: wrong values. Planted: ``as_strided`` runs on the
    layout its input has, and a channels-last value that something views is not restored
    to eager's strides at its definition. Caught by test_layout.py's
    ``test_inference_outputs_match_eager``.
    """

    name = "zoo:layout-views-read-channels-last"
    issue = "pytorch/pytorch#92063"
    title = ("inductor: make as_strided support non-contiguous input and always fix it's input "
             "layout using eager stride")
    catcher = "test_layout::test_inference_outputs_match_eager"

    def patches(self) -> list:
        return [mock.patch.object(plan, "plain_classes", _every_class_plain),
                mock.patch.object(layout_package, "plan_layout", _as_strided_takes_any_layout)]


def _restore_as_contiguous(t: torch.Tensor, stride: tuple[int, ...]) -> torch.Tensor:
    """``restore_strides`` that takes eager's layout to be contiguous, whatever it is."""
    return t.contiguous()


class EagerTakenAsContiguousLayout(_PlantedLayout):
    """pytorch/pytorch#174963, "torch.compile yields incorrect results when as_strided is
    used on channels_last tensor".

    With a channels-last input, eager's intermediate values are channels-last too; the
    compiled code laid one out contiguous, and an ``as_strided`` reading its memory returned
    other elements. Planted: a value restored to "eager's layout" is made contiguous,
    whatever eager's strides are. Caught by test_layout_inputs.py's
    ``test_laid_out_inputs_keep_eager_values_and_strides`` (nets run on channels-last and
    other non-contiguous inputs).
    """

    name = "zoo:layout-eager-taken-as-contiguous"
    issue = "pytorch/pytorch#174963"
    title = "torch.compile yields incorrect results when as_strided is used on channels_last tensor"
    catcher = "test_layout_inputs::test_laid_out_inputs_keep_eager_values_and_strides"

    def patches(self) -> list:
        return [mock.patch.object(rewrite, "restore_strides", _restore_as_contiguous)]


class CatOutputContiguousLayout(_PlantedLayout):
    """pytorch/pytorch#91233, "[inductor] fix output_stride of cat".

    The concatenation's output stride defaulted to contiguous when some inputs had no fixed
    layout, though its inputs were channels-last: eager's ``cat`` of channels-last tensors is
    channels-last. Planted: every ``cat`` result is made contiguous. Caught by
    test_layout_inputs.py's ``test_laid_out_inputs_keep_eager_values_and_strides``, where a
    ``cat`` of channels-last values reaches the output or an ``as_strided``.
    """

    name = "zoo:layout-cat-output-contiguous"
    issue = "pytorch/pytorch#91233"
    title = "[inductor] fix output_stride of cat"
    catcher = "test_layout_inputs::test_laid_out_inputs_keep_eager_values_and_strides"

    def patches(self) -> list:
        return []

    def optimize_layout(self, gm, example_inputs):
        gm = optimize_layout(gm, example_inputs)
        for node in list(gm.graph.nodes):
            if node.op == "call_function" and node.target in (torch.cat, torch.concat,
                                                              torch.ops.aten.cat.default):
                with gm.graph.inserting_after(node):
                    flat = gm.graph.call_method("contiguous", (node,))
                node.replace_all_uses_with(flat, delete_user_cb=lambda user, f=flat: user is not f)
        gm.graph.lint()
        gm.recompile()
        return gm


ZOO = [ChannelsLastOutputsLayout, ViewsReadChannelsLastLayout, EagerTakenAsContiguousLayout,
       CatOutputContiguousLayout]
