"""Least KV: the instance whose KV cache is least held by requests (evictable prefix entries do not count; ties:
fewer outstanding requests, then lowest index)."""
from __future__ import annotations


class LeastKVRouter:
    def __init__(self) -> None:
        """No parameters: a key given in the router's yaml is refused."""

    def route(self, req, instances):
        return min(instances, key=lambda inst: (inst.kv.active_utilization, inst.outstanding, inst.index))
