"""Target ``deepspeed``: DeepSpeed's flops profiler, ``get_model_profile``.

It patches torch functionals (F.linear, convs, transposed convs, SDPA, torch.matmul/bmm/...)
and reports FLOPs and MACs; the adapter reads its MACs (x2), its count of matrix products
without bias (its FLOPs add elementwise ops and conv bias). RNN module hooks go to its FLOPs
only, with gate arithmetic (estimated). Installed with ``DS_BUILD_OPS=0`` (no CUDA ops).
"""

from __future__ import annotations

from deepspeed.profiling.flops_profiler import get_model_profile

from refimpl.oracle.targets.flop_peers import PATCHED_FUNCTIONALS, PeerBackend


class DeepspeedBackend(PeerBackend):
    name = "deepspeed"
    package = "deepspeed"
    flop_conventions = PATCHED_FUNCTIONALS

    def count(self, model, inputs):
        _flops, macs, _params = get_model_profile(
            model, args=list(inputs), print_profile=False, detailed=False, as_string=False,
            warm_up=0)
        return macs
