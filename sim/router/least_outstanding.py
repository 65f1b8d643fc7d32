"""Least outstanding requests (join the shortest queue): the instance with the fewest waiting + running."""
from __future__ import annotations


class LeastOutstandingRouter:
    def route(self, req, instances):
        return min(instances, key=lambda inst: (inst.outstanding, inst.index))
