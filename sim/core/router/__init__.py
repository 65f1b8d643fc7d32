"""Routing across a pool's instances: `base.py` (the Router protocol) and one module per policy, registered in
`ROUTERS` (key = the yaml name in `conf/router/`)."""
from sim.core.router.least_kv import LeastKVRouter
from sim.core.router.least_outstanding import LeastOutstandingRouter
from sim.core.router.length_aware import LengthAwareRouter
from sim.core.router.prefix_affinity import PrefixAffinityRouter
from sim.core.router.round_robin import RoundRobinRouter

ROUTERS = {
    "round_robin": RoundRobinRouter,
    "least_outstanding": LeastOutstandingRouter,
    "least_kv": LeastKVRouter,
    "prefix_affinity": PrefixAffinityRouter,
    "length_aware": LengthAwareRouter,
}


def make_router(name: str, params: dict):
    try:
        factory = ROUTERS[name]
    except KeyError:
        raise KeyError(f"unknown router {name!r}; valid: {', '.join(ROUTERS)}") from None
    return factory(**params)
