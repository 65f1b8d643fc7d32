"""Least outstanding requests (join the shortest queue): the instance with the fewest waiting + running."""
from __future__ import annotations

from sim.core.router.base import least_loaded


class LeastOutstandingRouter:
    def __init__(self) -> None:
        """No parameters: a key given in the router's yaml is refused."""

    def route(self, req, instances):
        return least_loaded(instances)
