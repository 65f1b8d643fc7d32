"""Least outstanding requests (join the shortest queue): the instance with the fewest waiting + running."""
from __future__ import annotations

from sim.core.router.base import least_loaded


class LeastOutstandingRouter:
    def __init__(self) -> None:
        """No parameters (an explicit constructor: a compiled class without one would accept any keyword, so a
        misspelt yaml key would pass unnoticed)."""

    def route(self, req, instances):
        return least_loaded(instances)
