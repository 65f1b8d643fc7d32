"""Routing across a pool's instances: `base.py` (the Router protocol) and one module per policy, registered in
`ROUTERS` (key = the yaml name in `conf/router/`)."""
from sim.router.least_outstanding import LeastOutstandingRouter
from sim.router.round_robin import RoundRobinRouter

ROUTERS = {
    "round_robin": RoundRobinRouter,
    "least_outstanding": LeastOutstandingRouter,
}


def make_router(name: str, params: dict):
    try:
        return ROUTERS[name](**params)
    except KeyError:
        raise KeyError(f"unknown router {name!r}; valid: {', '.join(ROUTERS)}") from None
