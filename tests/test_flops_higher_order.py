"""refimpl's counter and higher-order ops other than cond: never a silent 0, never a lost result.

torch.while_loop is counted iteration by iteration (the property
properties/test_flops_while_loop.py); any other higher-order op without a formula runs with
the mode off and is listed by ``uncounted_ops()``, and its result comes back as without the
counter (torch's own counter hands back ``NotImplemented``: docs/findings.md, FLOPs 17).
"""

from __future__ import annotations

import torch
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan

from refimpl.flops.counter import FlopCounterMode


def test_scan_runs_and_is_listed_as_uncounted():
    init, xs = torch.eye(3), torch.randn(4, 3, 3)
    want_ys, want_carry = [], init
    for x in xs:  # scan's meaning, by hand: ys[i] is the carry before step i
        want_ys.append(want_carry)
        want_carry = want_carry @ x

    def combine(carry, x):
        return carry @ x, carry.clone()

    with FlopCounterMode(display=False) as counter:
        carry, ys = scan(combine, init, xs)
    torch.testing.assert_close((carry, ys), (want_carry, torch.stack(want_ys)))
    assert {str(op): n for op, n in counter.uncounted_ops().items()} == {"scan": 1}
    assert counter.get_total_flops() == 0


def test_map_runs_and_is_listed_as_uncounted():
    xs, w = torch.randn(2, 3, 3), torch.randn(3, 3)
    with FlopCounterMode(display=False) as counter:
        out = hop_map(lambda x, w: x @ w, xs, w)
    torch.testing.assert_close(out, xs @ w)
    assert [str(op) for op in counter.uncounted_ops()] == ["map_impl"]
