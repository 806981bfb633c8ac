"""The built-in targets, by name: one source of truth for ``--target NAME``.

Each entry names the factory that builds the backend (``module:attribute``, imported only when
the target is chosen) and the optional extra that installs what it needs (``None``: nothing
beyond refimpl's own requirements). A target whose package is missing is a clear error that
names the extra to install (:class:`MissingExtra`), never a silent fallback.

To add a built-in target: one line here, and its factory in ``refimpl/oracle/targets/``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TargetEntry:
    """Where a built-in target's backend comes from, and what it needs installed."""

    factory: str  # "module:attribute"; the attribute is a Backend class or factory
    extra: str | None = None  # pip extra that installs its package: pip install 'refimpl[X]'
    summary: str = ""


#: name -> entry. Names are what users type after --target.
BUILTIN_TARGETS: dict[str, TargetEntry] = {
    "refimpl": TargetEntry("refimpl.oracle.builtin:RefimplBackend",
                           summary="refimpl itself: the oracle checked against itself"),
    "torch": TargetEntry("refimpl.oracle.builtin:TorchBackend",
                         summary="torch's reference implementations"),
    "inductor": TargetEntry("refimpl.oracle.targets.inductor:InductorBackend",
                            summary="torch.compile's default backend (needs a C compiler)"),
    "torch-checkpoint": TargetEntry("refimpl.oracle.targets.checkpoints:TorchCheckpoint",
                                    summary="torch.utils.checkpoint, non-reentrant"),
    "torch-checkpoint-reentrant": TargetEntry(
        "refimpl.oracle.targets.checkpoints:TorchCheckpointReentrant",
        summary="torch.utils.checkpoint, reentrant"),
    "torch-sac": TargetEntry("refimpl.oracle.targets.checkpoints:TorchSAC",
                             summary="selective activation checkpointing, matmuls saved"),
    "checkpoint-wrapper": TargetEntry("refimpl.oracle.targets.checkpoints:CheckpointWrapper",
                                      summary="torch.distributed checkpoint_wrapper"),
    "fx-cse-pass": TargetEntry("refimpl.oracle.targets.fx_cse_pass:FxCsePassBackend",
                               summary="torch.fx.passes.dialect.common.cse_pass.CSEPass"),
    # FLOP peers (component model_flops): one adapter class each in oracle/targets/flop_peers.py,
    # which imports its peer's package when built (missing: MissingExtra naming the extra)
    "fvcore": TargetEntry("refimpl.oracle.targets.flop_peers:FvcoreBackend", "fvcore",
                          summary="fvcore FlopCountAnalysis (JIT trace, MACs)"),
    "ptflops": TargetEntry("refimpl.oracle.targets.flop_peers:PtflopsBackend", "ptflops",
                           summary="ptflops, its default pytorch backend (module hooks)"),
    "ptflops-aten": TargetEntry("refimpl.oracle.targets.flop_peers:PtflopsAtenBackend",
                                "ptflops", summary="ptflops, its aten backend (dispatch mode)"),
    "thop": TargetEntry("refimpl.oracle.targets.flop_peers:ThopBackend", "thop",
                        summary="thop.profile (module hooks, MACs)"),
    "calflops": TargetEntry("refimpl.oracle.targets.flop_peers:CalflopsBackend", "calflops",
                            summary="calflops.calculate_flops (patched functionals)"),
    "deepspeed": TargetEntry("refimpl.oracle.targets.flop_peers:DeepspeedBackend",
                             "deepspeed", summary="DeepSpeed flops profiler, get_model_profile"),
    "torchprofile": TargetEntry("refimpl.oracle.targets.flop_peers:TorchprofileBackend",
                                "torchprofile", summary="torchprofile.profile_macs (JIT trace)"),
}
