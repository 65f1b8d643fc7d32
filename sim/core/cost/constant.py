"""A synthetic cost model: every iteration takes `step_time_s + per_token_s x tokens computed`.

For checking the simulator's queueing against theory (M/D/1: constant steps; M/M/1 and M/M/c: one step per
request whose time is proportional to an exponentially distributed prompt) and for hand-computable tests; not
for capacity plans (the run's summary calls it `analytical`, with the note `synthetic`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from sim.core.cost.base import PARTS, BatchShape, StepCost
from sim.core.cost.host_overlap import scheduled_cost
from sim.core.cost.tables import StepCache, StepTable


class SyntheticCostModel:
    kind = "analytical"
    tokens_per_step = 1.0
    draft_tokens = 0
    acceptance: tuple[float, ...] = ()

    def __init__(self, step_time_s: float, per_token_s: float = 0.0) -> None:
        if step_time_s < 0 or per_token_s < 0 or not (step_time_s > 0 or per_token_s > 0):
            raise ValueError('"step_time_s" and "per_token_s" must be >= 0 and not both 0')
        self.step_time_s, self.per_token_s = float(step_time_s), float(per_token_s)
        self.steps = StepCache(self._price, self._price_step)  # every kept cost, as a layered model keeps them

    def _price(self, batch: BatchShape, ctx: Any) -> tuple[float, dict[str, float], float]:
        """(total, parts, hidden) of `batch` at any decode context sum(s): the context does not change the time."""
        seconds = self.step_time_s + self.per_token_s * batch.num_tokens
        parts = dict.fromkeys(PARTS, 0.0)
        parts["overhead"] = seconds
        return seconds, parts, 0.0

    def _price_step(self, batch: BatchShape) -> StepCost:
        total, parts, hidden = self._price(batch, 0.0)
        return StepCost(total, parts, hidden)

    def step_cost(self, batch: BatchShape, load_s: float = 0.0, host_s: float = 0.0, overlap: int = 0,
                  back_to_back: bool = False) -> StepCost:
        """The iteration's cost (`CostModel.step_cost`): the shape's from the step cache, with the KV load and
        exposed host work of the scheduled iteration (`sim.core.cost.host_overlap`)."""
        cost = self.steps.step_cost(batch)
        if load_s or host_s or overlap:
            return scheduled_cost(cost, load_s, host_s, overlap, back_to_back)
        return cost

    def decode_steps(self, batch: BatchShape, steps: int) -> tuple[StepTable, int, int]:
        """`steps` identical decode iterations, from the step cache's table of the shape (every entry the same)."""
        return self.steps.decode_steps(batch, steps)

    def decode_run(self, batch: BatchShape, steps: int, ctx_sums=None, with_hidden: bool = False,
                   compact: bool = False):
        """`steps` identical decode iterations (the same tokens each): constant step times, nothing hidden."""
        cost = self.step_cost(batch)
        out = (np.full(steps, cost.total_s), dict(cost.parts))
        return (*out, 0.0) if with_hidden else out

    def describe(self) -> dict:
        return {"kind": "analytical", "profile": None, "synthetic": {"step_time_s": self.step_time_s,
                "per_token_s": self.per_token_s}, "measured_ops": [], "analytical_ops": []}
