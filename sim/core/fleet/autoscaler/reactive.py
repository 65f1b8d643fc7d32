"""Reactive: scale on what the window shows — P99 TTFT/TPOT, queue per instance, KV utilisation.

Up by `step` when any signal is above its threshold (or the overload ladder asks for capacity); down by `step`
when every signal is below `scale_down_fraction` of its threshold (hysteresis); at most one change per
`cooldown_s`. Scale-down drains the least-loaded instance (see Pool.drain_instances).
"""
from __future__ import annotations

import math

from sim.core.fleet.autoscaler.base import ScalerContext


class ReactiveScaler:
    def __init__(self, interval_s: float = 10.0, ttft_p99_s: float | None = None, tpot_p99_s: float | None = 0.05,
                 queue_per_instance: float | None = 4.0, kv_utilization: float | None = 0.9, step: int = 1,
                 cooldown_s: float = 60.0, scale_down_fraction: float = 0.5,
                 context: ScalerContext | None = None) -> None:
        if interval_s <= 0 or step < 1 or cooldown_s < 0 or not 0 < scale_down_fraction < 1:
            raise ValueError("reactive: interval_s > 0, step >= 1, cooldown_s >= 0, 0 < scale_down_fraction < 1")
        self.interval_s, self.step, self.cooldown_s = interval_s, step, cooldown_s
        self.ttft_p99_s, self.tpot_p99_s = ttft_p99_s, tpot_p99_s
        self.queue_per_instance, self.kv_utilization = queue_per_instance, kv_utilization
        self.scale_down_fraction = scale_down_fraction
        self._last_change_s = -math.inf
        self.boost = False  # set by the overload ladder's first level

    def signals(self, now_s, pool, monitor) -> list[tuple[float, float | None]]:
        """(value, threshold) pairs; a None threshold is ignored."""
        active = pool.active
        n = max(1, len(active))
        queued = len(pool.held) + sum(len(i.policy.waiting) for i in active)
        kv = max((i.kv.active_utilization for i in active), default=0.0)
        return [(monitor.ttft.percentile(now_s, 99), self.ttft_p99_s),
                (monitor.tpot.percentile(now_s, 99), self.tpot_p99_s),
                (queued / n, self.queue_per_instance), (kv, self.kv_utilization)]

    def decide(self, now_s, pool, monitor):
        if now_s - self._last_change_s < self.cooldown_s:
            return None
        sig = [(v, t) for v, t in self.signals(now_s, pool, monitor) if t is not None]
        over = self.boost or any(v == v and v > t for v, t in sig)
        under = all((v != v) or v < t * self.scale_down_fraction for v, t in sig)
        if over:
            self._last_change_s = now_s
            return pool.provisioned + self.step
        if under and pool.provisioned > pool.min_instances:
            self._last_change_s = now_s
            return pool.provisioned - self.step
        return None
