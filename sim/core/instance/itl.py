"""Streaming inter-token latency quantiles for one instance (merged across instances for summary.json)."""
from __future__ import annotations

import math


class ItlSketch:
    """Inter-token latency: every gap between consecutive deliveries of output tokens to a client (a delivery of
    several tokens at once, a multi-step group's end or accepted MTP drafts, is one gap, as benchmark clients
    count chunks), in a DDSketch (1% relative accuracy, bounded bins): quantiles in bounded memory."""

    def __init__(self) -> None:
        from ddsketch import DDSketch
        self.sketch = DDSketch(relative_accuracy=0.01)

    def add(self, gap_s: float, weight: float = 1.0) -> None:
        self.sketch.add(max(gap_s, 0.0), weight)

    def merge(self, other: "ItlSketch") -> None:
        self.sketch.merge(other.sketch)

    def summary(self) -> dict[str, float]:
        s = self.sketch
        if s.count == 0:
            return {"p50": math.nan, "p90": math.nan, "p99": math.nan, "mean": math.nan}
        p50, p90, p99 = (s.get_quantile_value(q) for q in (0.5, 0.9, 0.99))
        assert p50 is not None and p90 is not None and p99 is not None
        return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "mean": float(s.sum / s.count)}
