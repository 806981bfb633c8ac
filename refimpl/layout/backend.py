"""A dynamo backend that runs a layout pass, then AOTAutograd with eager compilers.

``make_layout_backend(pass_fn)`` is how the layout properties reach a backend under test's
``optimize_layout``: the pass sees the dynamo graph, AOTAutograd traces what the pass made
(forward and backward), and the traced graphs run eagerly, so any difference from eager comes
from the pass. refimpl's own dynamo backend ``"refimpl"`` does the same with refimpl's
partitioner in between.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import fx


def _boxed_eager(gm: fx.GraphModule, example_inputs: list[Any]):
    # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(gm.forward)


def make_layout_backend(pass_fn: Callable[[fx.GraphModule, list[Any]], fx.GraphModule]):
    """A dynamo backend: ``pass_fn(gm, example_inputs)``, then eager AOTAutograd."""
    if not callable(pass_fn):
        raise TypeError(f"pass_fn must be callable (gm, example_inputs) -> GraphModule, got "
                        f"{type(pass_fn).__name__}")
    # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
    from torch._dynamo.backends.common import aot_autograd

    aot = aot_autograd(fw_compiler=_boxed_eager, bw_compiler=_boxed_eager)

    def backend(gm: fx.GraphModule, example_inputs: list[Any]):
        return aot(pass_fn(gm, example_inputs), example_inputs)

    return backend
