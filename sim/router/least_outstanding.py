"""Least outstanding requests (join the shortest queue): the instance with the fewest waiting + running."""
from __future__ import annotations

from sim.router.base import BY_LOAD


class LeastOutstandingRouter:
    def route(self, req, instances):
        return min(instances, key=BY_LOAD)
