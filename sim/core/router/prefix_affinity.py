"""Prefix affinity: send a request where the longest prefix of its prompt is already cached, unless that
instance is overloaded (more than `max_imbalance` outstanding requests above the least-loaded one), in which
case fall back to least outstanding. Requests without prefix hashes go least outstanding."""
from __future__ import annotations

from sim.core.router.base import least_loaded


class PrefixAffinityRouter:
    def __init__(self, max_imbalance: int = 8) -> None:
        if max_imbalance < 0:
            raise ValueError('"max_imbalance" must be >= 0')
        self.max_imbalance = max_imbalance

    def route(self, req, instances):
        least = least_loaded(instances)
        hashes = req.prefix_hashes
        if hashes is None or len(hashes) == 0:
            return least
        best, best_len = least, 0
        for inst in instances:
            n = inst.kv.cached_prefix_entries(hashes)
            if n > best_len or (n == best_len and n > 0 and inst.outstanding < best.outstanding):
                best, best_len = inst, n
        if best_len == 0 or best.outstanding > least.outstanding + self.max_imbalance:
            return least
        return best
