"""Predictive: forecast the arrival rate and provision ahead by the cold-start time.

Every `interval_s` the observed arrival rate feeds a Holt-Winters model with daily seasonality; the desired size
is the forecast rate at now + cold start + interval, times `headroom`, over `requests_per_s_per_instance` (the
per-instance throughput at which the SLO still holds — a planning input, e.g. from a sweep). With
`forecast: oracle` the true future rate of the workload is used instead (an upper bound on what forecasting can
give, and the "correct forecast" of the tests). `warm_spares` keeps pre-loaded replicas that switch in within
the pool's `warm_start_s`.
"""
from __future__ import annotations

import math

import numpy as np

from sim.core.fleet.autoscaler.base import ScalerContext
from sim.core.fleet.autoscaler.holt_winters import HoltWinters


class PredictiveScaler:
    def __init__(self, requests_per_s_per_instance: float, interval_s: float = 60.0, headroom: float = 1.2,
                 forecast: str = "holt_winters", season_s: float = 86400.0, alpha: float = 0.3, beta: float = 0.05,
                 gamma: float = 0.3, warm_spares: int = 0, context: ScalerContext | None = None) -> None:
        if not requests_per_s_per_instance > 0 or not interval_s > 0 or not headroom > 0:
            raise ValueError("predictive: requests_per_s_per_instance, interval_s and headroom must be > 0")
        if forecast not in ("holt_winters", "oracle"):
            raise ValueError(f"predictive: forecast must be holt_winters or oracle, got {forecast!r}")
        self.capacity = requests_per_s_per_instance
        self.interval_s, self.headroom, self.forecast_kind = interval_s, headroom, forecast
        self.model = HoltWinters(max(1, round(season_s / interval_s)), alpha, beta, gamma)
        self.warm_spares = warm_spares
        arrival_times_s = None if context is None else context.arrival_times_s
        self._arrivals = None if arrival_times_s is None else np.asarray(arrival_times_s)
        self.boost = False
        self._last_count = 0
        self._started = False

    def _oracle_rate(self, t0: float, t1: float) -> float:
        a = self._arrivals
        assert a is not None
        return float(np.searchsorted(a, t1) - np.searchsorted(a, t0)) / max(t1 - t0, 1e-9)

    def decide(self, now_s, pool, monitor):
        if not self._started:
            self._started = True
            pool.set_warm_spares(self.warm_spares)
        lead_s = pool.cold_start.total_s(pool.memory.weight_bytes) + self.interval_s
        if self.forecast_kind == "oracle":
            if self._arrivals is None:
                raise ValueError("predictive: forecast=oracle needs the workload's arrival times")
            rate = self._oracle_rate(now_s + lead_s - self.interval_s, now_s + lead_s + self.interval_s)
        else:
            self.model.update(monitor.arrivals.count(now_s) / min(monitor.window_s, max(now_s, 1e-9)))
            rate = max(0.0, self.model.forecast(max(1, math.ceil(lead_s / self.interval_s))))
        return math.ceil(rate * self.headroom / self.capacity)
