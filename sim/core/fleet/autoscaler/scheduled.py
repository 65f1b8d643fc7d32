"""Scheduled: a time-of-day plan (as when serving nodes are lent to training at night).

`plan` is `PlanStep`s (the yaml's `{at_s, instances}` list, parsed at load by sim/resolve.py) within a
`period_s` day; the pool follows the step in force at the current time of day (`time_offset_s` is the time of day at simulated t = 0).
"""
from __future__ import annotations

from inferplan.config.fleet import PlanStep
from sim.core.fleet.autoscaler.base import ScalerContext


class ScheduledScaler:
    def __init__(self, plan: tuple[PlanStep, ...], interval_s: float = 60.0, period_s: float = 86400.0,
                 time_offset_s: float = 0.0,
                 context: ScalerContext | None = None) -> None:
        if not plan:
            raise ValueError("scheduled: plan needs at least one {at_s, instances} step")
        steps = sorted((float(s.at_s), int(s.instances)) for s in plan)
        if any(not 0 <= at < period_s for at, _ in steps) or any(n < 0 for _, n in steps):
            raise ValueError("scheduled: each step needs 0 <= at_s < period_s and instances >= 0")
        self.steps, self.interval_s, self.period_s, self.offset_s = steps, interval_s, period_s, time_offset_s
        self.boost = False

    def target_at(self, now_s: float) -> int:
        tod = (now_s + self.offset_s) % self.period_s
        current = self.steps[-1][1]  # before the first step of the day, the last step of the previous day holds
        for at, n in self.steps:
            if at <= tod:
                current = n
        return current

    def decide(self, now_s, pool, monitor):
        return self.target_at(now_s)
