"""Least KV: the instance whose KV cache is least used (ties: fewer outstanding requests, then lowest index)."""
from __future__ import annotations


class LeastKVRouter:
    def route(self, req, instances):
        return min(instances, key=lambda inst: (inst.kv.used_blocks / inst.kv.num_blocks, inst.outstanding, inst.index))
