"""The autoscaling extension point: how many instances a pool should have, decided periodically.

An autoscaler is driven by `run_autoscaler`, a SimPy process per pool that calls `decide` every `interval_s`
simulated seconds and applies the answer with `Pool.scale_to` (which clamps to [min, max] and drains, never
drops). `decide` returns the desired number of provisioned (active + starting) instances, or None to leave the
pool as it is.
"""
from __future__ import annotations

from typing import Protocol


class Autoscaler(Protocol):
    interval_s: float

    def decide(self, now_s: float, pool, monitor) -> int | None: ...


def run_autoscaler(env, pool, monitor, scaler: Autoscaler, log: list):
    """The SimPy process applying one pool's autoscaler; each change is logged as (t_s, pool, old, new)."""
    while True:
        yield env.timeout(scaler.interval_s)
        want = scaler.decide(env.now, pool, monitor)
        if want is None:
            continue
        old = pool.provisioned
        new = pool.scale_to(want)
        if new != old:
            log.append((float(env.now), pool.name, old, new))
