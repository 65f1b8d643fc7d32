"""Length-aware: short and long prompts to different instances, so long prefills do not stall short requests.

The first `short_fraction` of the instances (at least one, at most all but one when there are two or more) take
prompts of at most `threshold_tokens`; the rest take longer ones; least outstanding within each group.
"""
from __future__ import annotations

from sim.core.router.base import least_loaded


class LengthAwareRouter:
    def __init__(self, threshold_tokens: int = 2048, short_fraction: float = 0.5) -> None:
        if threshold_tokens < 1 or not 0 < short_fraction < 1:
            raise ValueError('"threshold_tokens" must be >= 1 and "short_fraction" in (0, 1)')
        self.threshold_tokens, self.short_fraction = threshold_tokens, short_fraction

    def route(self, req, instances):
        n = len(instances)
        if n == 1:
            return instances[0]
        k = min(n - 1, max(1, round(n * self.short_fraction)))
        group = instances[:k] if req.prompt_tokens <= self.threshold_tokens else instances[k:]
        return least_loaded(group)
