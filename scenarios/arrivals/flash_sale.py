"""A flash sale: a multiplier on a base rate curve that ramps to k× within minutes, holds, then decays.

    multiplier(t) = 1                                         t < start_s
                    1 + (k − 1) · (t − start_s) / ramp_s      during the ramp (linear)
                    k                                         for hold_s after the ramp
                    1 + (k − 1) · exp(−(t − t_hold_end) / decay_s)   afterwards (exponential decay to 1)

Several sales add their excesses: multiplier = 1 + Σᵢ (multiplierᵢ − 1), so overlapping sales never multiply.
The curve they apply to (constant, daily, from data) is unchanged outside the sales.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scenarios.arrivals.nhpp import RateFn
from scenarios.config_reader import ConfigReader


@dataclass(frozen=True)
class FlashSale:
    """Times in seconds of simulated time; `peak_multiplier` k ≥ 1 is the peak rate over the base rate."""

    start_s: float
    ramp_s: float
    hold_s: float
    decay_s: float
    peak_multiplier: float

    def excess(self, t: np.ndarray) -> np.ndarray:
        """multiplier(t) − 1, for t in seconds."""
        t = np.asarray(t, dtype=np.float64)
        k1 = self.peak_multiplier - 1.0
        ramp_end = self.start_s + self.ramp_s
        hold_end = ramp_end + self.hold_s
        ramp = k1 * np.clip((t - self.start_s) / self.ramp_s, 0.0, 1.0) if self.ramp_s > 0 else np.where(
            t >= self.start_s, k1, 0.0)
        decay = k1 * np.exp(-np.maximum(t - hold_end, 0.0) / self.decay_s)
        return np.where(t < ramp_end, ramp, np.where(t < hold_end, k1, decay))


def with_flash_sales(base: RateFn, sales: Sequence[FlashSale]) -> RateFn:
    """The rate curve `base(t) · (1 + Σ excessᵢ(t))`."""
    if not sales:
        return base

    def rate(t: np.ndarray) -> np.ndarray:
        mult = 1.0 + sum(sale.excess(t) for sale in sales)
        return base(t) * mult
    return rate


def read(r: ConfigReader, *, finish: bool = True) -> FlashSale:
    """Keys: `start_s` (≥ 0), `ramp_s` (≥ 0), `hold_s` (≥ 0, default 0), `decay_s` (> 0), `peak_multiplier`
    (≥ 1).

    `finish=False` leaves other keys of the block to the caller (the `flash_sale` traffic kind)."""
    sale = FlashSale(
        start_s=r.number("start_s", minimum=0.0), ramp_s=r.number("ramp_s", minimum=0.0),
        hold_s=r.number("hold_s", 0.0, minimum=0.0), decay_s=r.number("decay_s", positive=True),
        peak_multiplier=r.number("peak_multiplier", minimum=1.0),
    )
    if finish:
        r.finish()
    return sale
