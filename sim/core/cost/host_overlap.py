"""What a scheduled iteration costs beyond its shape: KV it must load first, and the host work it exposes.

A cost model prices a shape (`StepCost`: GPU time plus its per-iteration host overhead h, part `overhead`). The
iteration the scheduler forms may add two things the shape does not say:

* `load_s`: KV moving before the iteration can run (second-tier prefix loads, swaps in), added to its
  `communication`;
* `host_s`: per-sequence host work (an engine preset's scheduling, sampling bookkeeping, detokenisation), added to
  h, and how much of h + host_s runs under the previous iteration's GPU time g (the iteration's total less h).
  An iteration that starts when the previous one ended (`back_to_back`: the engine was busy) ran its host work
  under that one's GPU time: OVERLAP_ALL (SGLang's overlap scheduler) exposes max(0, h + s - g), OVERLAP_OUTPUT
  (vLLM V0 async output processing: the per-sequence part) h + max(0, s - g); OVERLAP_NONE, and the first
  iteration after idle (nothing ran to hide it), expose h + s.

`scheduled_cost` applies both to the shape's price; it is the one place they are priced (`CostModel.step_cost`).
"""
from __future__ import annotations

from typing import Final

from sim.core.cost.base import StepCost

# Which host work runs under the previous iteration's GPU time (an engine preset's `overlap`).
OVERLAP_NONE: Final = 0
OVERLAP_OUTPUT: Final = 1
OVERLAP_ALL: Final = 2


def scheduled_cost(cost: StepCost, load_s: float, host_s: float, overlap: int, back_to_back: bool) -> StepCost:
    """The iteration's cost: the shape's `cost` with `load_s` of KV loading in its communication, then its host
    overhead h + `host_s` exposed as `overlap` and `back_to_back` say (module doc). `cost` itself when neither
    adds anything (the shape's price, to the bit)."""
    if load_s:
        parts = dict(cost.parts)
        parts["communication"] += load_s
        cost = StepCost(cost.total_s + load_s, parts, cost.hidden_s)
    if not (host_s or overlap):
        return cost
    h, s = cost.parts["overhead"], host_s
    gpu = cost.total_s - h
    if back_to_back and overlap == OVERLAP_ALL:
        exposed = h + s - gpu
        if exposed < 0.0:
            exposed = 0.0
    elif back_to_back and overlap == OVERLAP_OUTPUT:
        exposed = h + (s - gpu if s > gpu else 0.0)
    else:
        exposed = h + s
    if exposed == h:
        return cost
    parts = dict(cost.parts)
    parts["overhead"] = exposed
    return StepCost(gpu + exposed, parts, cost.hidden_s)
