"""Streaming inter-token latency quantiles for one instance (merged across instances for summary.json).

A log-bucket histogram with DDSketch's guarantee (Masson et al., VLDB 2019): a gap x > 0 is counted in bucket
k = ceil(log_gamma(x)), gamma = (1 + a) / (1 - a), and a quantile reads back 2 gamma^k / (1 + gamma), within a
relative error a = 1% of a gap of that rank. It is the `ddsketch` package's `DDSketch(0.01)` (logarithmic mapping,
unlimited dense store) computed the same way, float for float (the same keys, bucket weights summed in the same
order, the same rank walk), so the quantiles are identical (`tests/sim/test_itl.py` pins them to the package); it
is here because that package's `add` is interpreted Python (about 5 us a gap) while this module is compiled with
the rest of sim/core. Buckets are a dict from key to weight: one per 2% band of gap values that occurred (a few
hundred over microseconds to minutes), so memory is bounded whatever the number of gaps.
"""
from __future__ import annotations

import math
import sys
from typing import Final

RELATIVE_ACCURACY: Final = 0.01
_MANTISSA: Final = 2 * RELATIVE_ACCURACY / (1 - RELATIVE_ACCURACY)
_GAMMA: Final = 1 + _MANTISSA
_LN2: Final = math.log(2.0)
# DDSketch's LogarithmicMapping: log_gamma(x) = log2(x) * multiplier, multiplier = ln 2 / ln(gamma). (log2 as
# math.log(x, 2) computes it, log(x) / log(2): the same float.)
_MULTIPLIER: Final = (1 / math.log1p(_MANTISSA)) * _LN2
_MIN_POSITIVE: Final = sys.float_info.min * _GAMMA  # at or below this a gap counts as zero


class ItlSketch:
    """Inter-token latency: every gap between consecutive deliveries of output tokens to a client (a delivery of
    several tokens at once, a multi-step group's end or accepted MTP drafts, is one gap, as benchmark clients
    count chunks), in log buckets of 1% relative accuracy: quantiles in bounded memory."""

    def __init__(self) -> None:
        self.bins: dict[int, float] = {}
        self.zero_count = 0.0
        self.count = 0.0
        self.sum_s = 0.0
        # The bucket the latest gaps fell in, with their weight not yet in `bins` (`_settle` adds it): a run of
        # deliveries mostly shares one gap, and a repeated gap needs neither the logarithm nor the dict. Weights
        # are counts (whole numbers), so adding them up first gives `bins` the same floats.
        self._gap_s = -1.0
        self._key = 0
        self._pending = 0.0

    def add(self, gap_s: float, weight: float = 1.0) -> None:
        """Count `weight` (a whole number > 0) gaps of `gap_s` seconds (negative: 0)."""
        if gap_s > _MIN_POSITIVE:
            if gap_s != self._gap_s:
                key = int(math.ceil(math.log(gap_s) / _LN2 * _MULTIPLIER))
                if key != self._key:
                    self._settle()
                    self._key = key
                self._gap_s = gap_s
            self._pending += weight
        else:
            if gap_s < 0.0:
                gap_s = 0.0
            self.zero_count += weight
        self.count += weight
        self.sum_s += gap_s * weight

    def _settle(self) -> None:
        """Put the pending weight into its bucket."""
        if self._pending:
            bins, key = self.bins, self._key
            bins[key] = bins.get(key, 0.0) + self._pending
            self._pending = 0.0

    def merge(self, other: ItlSketch) -> None:
        """Add every gap counted by `other` (bucket by bucket, as DDSketch merges)."""
        if other.count == 0.0:
            return
        self._settle()
        other._settle()
        bins = self.bins
        for key, w in other.bins.items():
            bins[key] = bins.get(key, 0.0) + w
        self.zero_count += other.zero_count
        self.count += other.count
        self.sum_s += other.sum_s

    def quantile_s(self, q: float) -> float:
        """The gap at quantile q (0..1) of a non-empty sketch: the bucket holding rank q (count - 1)."""
        self._settle()
        rank = q * (self.count - 1)
        if rank < self.zero_count:
            return 0.0
        rank -= self.zero_count
        keys = sorted(self.bins)
        running = 0.0
        for key in keys:
            running += self.bins[key]
            if running > rank:
                return _value(key)
        return _value(keys[-1])

    def summary(self) -> dict[str, float]:
        if self.count == 0.0:
            return {"p50": math.nan, "p90": math.nan, "p99": math.nan, "mean": math.nan}
        return {"p50": self.quantile_s(0.5), "p90": self.quantile_s(0.9), "p99": self.quantile_s(0.99),
                "mean": self.sum_s / self.count}


def _value(key: int) -> float:
    """The value a bucket reads back as (DDSketch's LogarithmicMapping.value)."""
    return math.pow(2.0, key / _MULTIPLIER) * (2.0 / (1 + _GAMMA))
