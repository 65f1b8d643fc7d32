"""The overload ladder: what operators configure for when latency runs away.

Every `check_interval_s` the windowed P99 time per output token (over the watched pools) is compared with three
thresholds. Past the first, the pools are asked to scale up; past the second, new requests go to the fallback
pool (a smaller, distilled or more aggressively quantized model), recorded per request; past the third, a circuit
breaker rejects new requests with reason `circuit_breaker`. A level is released when the P99 falls below
`release_fraction` of its threshold (hysteresis). Defaults follow the published three-level example: 50, 80 and
120 ms. Queue caps (`max_queue_per_instance`) are admission control: over the cap, a request is rejected with
`queue_full`. Nothing is dropped silently: every turned-away request carries its reason.
"""
from __future__ import annotations

from inferplan.config.fleet import OverloadConfig
from sim.core.fleet.monitor import Window

NORMAL, SCALE_UP, FALLBACK, BREAKER = 0, 1, 2, 3
LEVEL_NAMES = ("normal", "scale_up", "fallback", "circuit_breaker")


class OverloadLadder:
    """The ladder's level, moved by `update` from the windowed P99 TPOT that finished requests feed
    (`observe_tpot`, once per request)."""

    def __init__(self, cfg: OverloadConfig) -> None:
        self.cfg = cfg
        self.level = NORMAL
        self.tpot = Window(cfg.window_s)
        self.transitions: list[tuple[float, int, int, float]] = []  # (t_s, from_level, to_level, p99_tpot_s)

    def observe_tpot(self, t_s: float, tpot_s: float) -> None:
        self.tpot.add(t_s, tpot_s)

    def thresholds(self) -> tuple[float, float, float]:
        c = self.cfg
        return c.scale_up_tpot_p99_s, c.fallback_tpot_p99_s, c.breaker_tpot_p99_s

    def update(self, now_s: float) -> int:
        """Recompute the level from the window; returns it."""
        if self.tpot.count(now_s) < self.cfg.min_samples:
            p99 = float("nan")
        else:
            p99 = self.tpot.percentile(now_s, 99)
        level = self.level
        if p99 == p99:
            th = self.thresholds()
            engaged = max((i + 1 for i, t in enumerate(th) if p99 > t), default=NORMAL)
            if engaged > level:
                level = engaged
            else:
                while level > NORMAL and p99 < th[level - 1] * self.cfg.release_fraction:
                    level -= 1
        elif level > NORMAL:
            # Too few finishes in the window to measure (e.g. the breaker let nothing in for window_s): step down
            # one level per check, a half-open breaker; if the overload persists its P99 re-engages the level.
            level -= 1
        if level != self.level:
            self.transitions.append((float(now_s), self.level, level, p99))
            self.level = level
        return level
