"""Fixed: the pool keeps the size it started with."""
from __future__ import annotations


class FixedScaler:
    interval_s = 3600.0

    def decide(self, now_s, pool, monitor):
        return None
