"""The dynamo backend ``"refimpl"``: layout pass, then AOTAutograd with refimpl's partitioner.

``torch.compile(f, backend="refimpl")`` reads ``torch._functorch.config``'s
``activation_memory_budget``, ``activation_memory_budget_runtime_estimator`` and
``activation_memory_budget_solver`` (refimpl's exact solver unless that is set to one of
torch's knapsack names) and ``cse`` when a graph is compiled (the first call), so a test
written for ``aot_eager_decomp_partition`` runs on refimpl by swapping the backend name.
Decompositions are inductor's table, as ``aot_eager_decomp_partition`` uses; the forward and
backward graphs run eagerly (boxed nop compilers). The backend is registered through the
``torch_dynamo_backends`` entry point and, should that not be installed, on import here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch import fx

import refimpl.layout as layout_pass
from refimpl.partition.fx_edge import partition_fn
from refimpl.partition.graph import JointGraph
from refimpl.partition.mutation import mutated_inputs
from refimpl.partition.options import PartitionOptions
from refimpl.partition.plan import Plan


def _decompositions() -> dict:
    # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
    from torch._inductor.compile_fx import select_decomp_table

    return select_decomp_table()


class DynamoBackend:
    """A dynamo backend with fixed options (``None``: read torch's config at compile time);
    ``on_plan`` receives the :class:`Plan` of every graph it partitions, ``on_graph`` the
    plain joint graph. ``compiled`` counts the graphs it has compiled."""

    def __init__(self, options: PartitionOptions | None = None,
                 on_plan: Callable[[Plan], None] | None = None,
                 on_graph: Callable[[JointGraph], None] | None = None) -> None:
        if options is not None and not isinstance(options, PartitionOptions):
            raise TypeError(f"options must be a PartitionOptions, got {type(options).__name__}")
        self.options = options
        self.on_plan = on_plan
        self.on_graph = on_graph
        self.compiled = 0

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
        from torch._dynamo.backends.common import aot_autograd
        from torch._dynamo.backends.debugging import boxed_nop

        self.compiled += 1
        options = self.options or PartitionOptions.from_torch_config()
        mutated = mutated_inputs(gm, example_inputs)
        if options.optimize_layout:
            gm = layout_pass.optimize_layout(gm, example_inputs)  # looked up per call
        partition = functools.partial(partition_fn, options=options, on_plan=self.on_plan,
                                      on_graph=self.on_graph, mutated_inputs=mutated)
        return aot_autograd(fw_compiler=boxed_nop, bw_compiler=boxed_nop,
                            decompositions=_decompositions(),
                            partition_fn=partition)(gm, example_inputs)


def refimpl_backend(gm: fx.GraphModule, example_inputs: list[Any], **kwargs: Any):
    """The registered backend: options from ``torch._functorch.config`` at compile time."""
    if kwargs:
        raise TypeError(f"backend 'refimpl' takes no options, got {sorted(kwargs)}; "
                        "use torch._functorch.config or refimpl.compile(...)")
    return DynamoBackend()(gm, example_inputs)


def _register() -> None:
    """Register ``"refimpl"`` with dynamo unless the entry point already provides it."""
    # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
    from torch._dynamo.backends import registry

    registry._discover_entrypoint_backends()
    if "refimpl" not in registry._BACKENDS or registry._BACKENDS["refimpl"] is None:
        registry.register_backend(name="refimpl", compiler_fn=refimpl_backend)


_register()
