"""Fixed: the pool keeps the size it started with."""
from __future__ import annotations


from sim.core.fleet.autoscaler.base import ScalerContext


class FixedScaler:
    def __init__(self, context: ScalerContext | None = None) -> None:
        self.interval_s = 3600.0
        self.boost = False

    def decide(self, now_s: float, pool, monitor) -> int | None:
        return None
