"""Round robin: instances in turn, regardless of load."""
from __future__ import annotations


class RoundRobinRouter:
    def __init__(self) -> None:
        self._next = 0

    def route(self, req, instances):
        inst = instances[self._next % len(instances)]
        self._next += 1
        return inst
