"""The routing extension point: which instance of a pool serves a request."""
from __future__ import annotations

from operator import attrgetter
from typing import Protocol, Sequence

from sim.instance.instance import Instance
from sim.instance.request_state import SimRequest


class Router(Protocol):
    """Picks one of `instances` (non-empty, all accepting work) for `req`. Deterministic: ties break by the
    lowest instance index, and any randomness comes from a named stream handed over at construction."""

    def route(self, req: SimRequest, instances: Sequence[Instance]) -> Instance: ...


# The usual ordering key: fewer outstanding requests first, then the lowest index (attrgetter: it runs for every
# instance on every request).
BY_LOAD = attrgetter("outstanding", "index")
