"""The routing extension point: which instance of a pool serves a request."""
from __future__ import annotations

from typing import Protocol, Sequence

from sim.core.instance.instance import Instance
from sim.core.instance.request_state import SimRequest


class Router(Protocol):
    """Picks one of `instances` (non-empty, all accepting work) for `req`. Constructed as
    `cls(**yaml_parameters)`, one per pool. Deterministic: a function of the request and the instances' state,
    ties broken by the lowest instance index (no router draws random numbers)."""

    def route(self, req: SimRequest, instances: Sequence[Instance]) -> Instance: ...


def least_loaded(instances: Sequence[Instance]) -> Instance:
    """The instance with the fewest outstanding requests, ties to the lowest index."""
    best = instances[0]
    for inst in instances:
        if inst.outstanding < best.outstanding or (inst.outstanding == best.outstanding and inst.index < best.index):
            best = inst
    return best
