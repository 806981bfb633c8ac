"""The one options dataclass of the layout pass."""

from __future__ import annotations

from dataclasses import dataclass, field

MODES = ("auto", "always", "never")

#: inductor's measured channels-last cost per conv class (< 1: channels-last is faster);
#: torch/_inductor/graph.py, GraphLowering.decide_layout_opt.
DEFAULT_MULTIPLIERS = {"grouped": 1.358, "small": 0.783, "in_out": 0.725, "default": 0.823}


@dataclass(frozen=True)
class LayoutOptions:
    """How :func:`refimpl.layout.optimize_layout` decides.

    mode: ``auto`` applies the cost rule (:mod:`refimpl.layout.decision`); ``always`` skips
        the cost rule (inductor's ``force_layout_optimization``) but not the safety rule on
        dynamic shapes; ``never`` leaves the graph as it is.
    is_inference: None infers it (training when grad mode is on and an example input
        requires grad); True/False states it.
    max_nodes_per_conv: a graph with at least this many nodes per conv is left alone.
    multipliers: channels-last cost per conv class (keys grouped, small, in_out, default).
    """

    mode: str = "auto"
    is_inference: bool | None = None
    max_nodes_per_conv: int = 300
    multipliers: dict = field(default_factory=lambda: dict(DEFAULT_MULTIPLIERS))

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r} is not one of {', '.join(MODES)}")
        if not (self.is_inference is None or isinstance(self.is_inference, bool)):
            raise ValueError(f"is_inference={self.is_inference!r}: expected None, True or False")
        n = self.max_nodes_per_conv
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"max_nodes_per_conv={self.max_nodes_per_conv!r}: expected an "
                             "int >= 1")
        costs = self.multipliers
        if not isinstance(costs, dict) or set(costs) != set(DEFAULT_MULTIPLIERS) or not all(
                _positive_number(v) for v in costs.values()):
            raise ValueError(f"multipliers={costs!r}: expected a dict of positive numbers for "
                             f"exactly the keys {sorted(DEFAULT_MULTIPLIERS)}")


def _positive_number(value: object) -> bool:
    """An int or float above zero; a bool is not a cost."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value > 0
