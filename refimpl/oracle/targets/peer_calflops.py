"""Target ``calflops``: ``calflops.calculate_flops`` (patched functionals, DeepSpeed-derived).

calflops reports FLOPs and MACs; the adapter reads its MACs (x2), its count of matrix
products without bias (its FLOPs add elementwise ops and conv bias). RNNs go to its FLOPs
only, with gate arithmetic (estimated). It states support for CNNs, RNNs and transformers,
so attention (SDPA, MultiheadAttention) and explicit matmuls are expected to be counted.
"""

from __future__ import annotations

from calflops import calculate_flops

from refimpl.oracle.targets.flop_peers import PATCHED_FUNCTIONALS, PeerBackend


class CalflopsBackend(PeerBackend):
    name = "calflops"
    package = "calflops"
    flop_conventions = PATCHED_FUNCTIONALS

    def count(self, model, inputs):
        _flops, macs, _params = calculate_flops(
            model, args=list(inputs), print_results=False, print_detailed=False,
            output_as_string=False)
        return macs
