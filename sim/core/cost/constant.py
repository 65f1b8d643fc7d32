"""A synthetic cost model: every iteration takes `step_time_s + per_token_s x tokens computed`.

For checking the simulator's queueing against theory (M/D/1: constant steps; M/M/1 and M/M/c: one step per
request whose time is proportional to an exponentially distributed prompt) and for hand-computable tests; not
for capacity plans (the run's summary calls it `analytical`, with the note `synthetic`).
"""
from __future__ import annotations

import numpy as np

from sim.core.cost.base import PARTS, BatchShape, StepCost
from sim.core.cost.tables import StepTable


class SyntheticCostModel:
    kind = "analytical"
    tokens_per_step = 1.0
    draft_tokens = 0
    acceptance: tuple[float, ...] = ()

    def __init__(self, step_time_s: float, per_token_s: float = 0.0) -> None:
        if step_time_s < 0 or per_token_s < 0 or not (step_time_s > 0 or per_token_s > 0):
            raise ValueError('"step_time_s" and "per_token_s" must be >= 0 and not both 0')
        self.step_time_s, self.per_token_s = float(step_time_s), float(per_token_s)
        self._cache: dict[int, StepCost] = {}
        self._tables: dict[int, StepTable] = {}

    def step_cost(self, batch: BatchShape) -> StepCost:
        n = batch.num_tokens
        cost = self._cache.get(n)
        if cost is None:
            parts = dict.fromkeys(PARTS, 0.0)
            parts["overhead"] = self.step_time_s + self.per_token_s * n
            cost = self._cache[n] = StepCost(parts["overhead"], parts)
        return cost

    def decode_steps(self, batch: BatchShape, steps: int) -> tuple[StepTable, int, int]:
        """`steps` identical decode iterations: every step reads the one entry of a constant table (stride 0)."""
        n = batch.num_tokens
        table = self._tables.get(n)
        if table is None:
            cost = self.step_cost(batch)
            table = self._tables[n] = StepTable(0, 1, [cost.total_s], dict(cost.parts), 0.0)
        return table, 0, 0

    def decode_run(self, batch: BatchShape, steps: int, ctx_sums=None, with_hidden: bool = False,
                   compact: bool = False):
        """`steps` identical decode iterations (the same tokens each): constant step times, nothing hidden."""
        cost = self.step_cost(batch)
        out = (np.full(steps, cost.total_s), dict(cost.parts))
        return (*out, 0.0) if with_hidden else out

    def describe(self) -> dict:
        return {"kind": "analytical", "profile": None, "synthetic": {"step_time_s": self.step_time_s,
                "per_token_s": self.per_token_s}, "measured_ops": [], "analytical_ops": []}
