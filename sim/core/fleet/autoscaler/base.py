"""The autoscaling extension point: how many instances a pool should have, decided periodically.

An autoscaler is driven by `run_autoscaler`, a SimPy process per pool that calls `decide` every `interval_s`
simulated seconds and applies the answer with `Pool.scale_to` (which clamps to [min, max] and drains, never
drops). `decide` returns the desired number of provisioned (active + starting) instances, or None to leave the
pool as it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ScalerContext:
    """What an autoscaler may know beyond its yaml parameters, handed to every constructor as `context=`: the
    run's arrival times (numpy array, s; read only by the predictive policy's `oracle` forecast)."""

    arrival_times_s: Any = None


class Autoscaler(Protocol):
    """Constructed as `cls(**yaml_parameters, context=ScalerContext)`. `boost` is set by the overload ladder while
    its scale-up level is on (a policy may act on it or not)."""

    interval_s: float
    boost: bool

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
