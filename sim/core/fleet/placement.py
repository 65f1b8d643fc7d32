"""Placement: which pool a new request goes to, by its class (interactive or batch, short or long, priority).

`routes` (one `Route` per request class, parsed at load by sim/resolve.py) gives a class's candidate pools in
order of preference; `default` serves unlisted classes.
- `static`: the first candidate, always.
- `spill_over`: the first candidate that is not saturated (queue per active instance below
  `spill_queue_per_instance`, and at least one active instance); if all are, the least saturated.
- `cost_aware`: the cheapest candidate (price per instance-hour) that meets the class's SLO at its current load
  (windowed P99 TTFT and TPOT within the class's `ClassSlo`) and is not saturated; else the least saturated.
Adding a policy: a class here, one line in `PLACEMENTS`, a documented `placement.name` value.
"""
from __future__ import annotations

import math

from inferplan.config.fleet import ClassSlo, Route
from sim.core.fleet.billing import usd_per_instance_hour


def saturation(pool) -> float:
    """Queued requests per active instance (inf with no active instance)."""
    active = pool.active
    if not active:
        return math.inf
    return (len(pool.held) + sum(len(i.policy.waiting) for i in active)) / len(active)


class StaticPlacement:
    def __init__(self, routes: tuple[Route, ...] = (), default: tuple[str, ...] = ()) -> None:
        self.routes = {r.request_class: r.pools for r in routes}
        self.default = tuple(default)

    def candidates(self, class_name: str) -> list[str]:
        return list(self.routes.get(class_name, self.default))

    def choose(self, class_name: str, pools: dict, monitors: dict, now_s: float) -> str:
        return self.candidates(class_name)[0]


class SpillOverPlacement(StaticPlacement):
    def __init__(self, routes: tuple[Route, ...] = (), default: tuple[str, ...] = (),
                 spill_queue_per_instance: float = 8.0) -> None:
        super().__init__(routes, default)
        self.limit = spill_queue_per_instance

    def choose(self, class_name: str, pools: dict, monitors: dict, now_s: float) -> str:
        cands = self.candidates(class_name)
        for name in cands:
            if saturation(pools[name]) < self.limit:
                return name
        return min(cands, key=lambda n: (saturation(pools[n]), cands.index(n)))


class CostAwarePlacement(SpillOverPlacement):
    def __init__(self, routes: tuple[Route, ...] = (), default: tuple[str, ...] = (),
                 spill_queue_per_instance: float = 8.0, class_slo: tuple[ClassSlo, ...] = ()) -> None:
        super().__init__(routes, default, spill_queue_per_instance)
        self.class_slo = {c.request_class: c for c in class_slo}

    def _meets(self, class_name, name, pools, monitors, now_s) -> bool:
        slo = self.class_slo.get(class_name)
        mon = monitors[name]
        if slo is not None:
            for bound, window in ((slo.ttft_p99_s, mon.ttft), (slo.tpot_p99_s, mon.tpot)):
                if bound is not None:
                    p99 = window.percentile(now_s, 99)
                    if p99 == p99 and p99 > bound:
                        return False
        return saturation(pools[name]) < self.limit

    def choose(self, class_name: str, pools: dict, monitors: dict, now_s: float) -> str:
        cands = self.candidates(class_name)
        ok = [n for n in cands if self._meets(class_name, n, pools, monitors, now_s)]
        if ok:
            return min(ok, key=lambda n: (usd_per_instance_hour(pools[n]), cands.index(n)))  # (as billed)
        return min(cands, key=lambda n: (saturation(pools[n]), cands.index(n)))


PLACEMENTS = {"static": StaticPlacement, "spill_over": SpillOverPlacement, "cost_aware": CostAwarePlacement}
