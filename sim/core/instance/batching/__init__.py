"""Batching policies (key = yaml name in `conf/batching/`): `base.py` holds the protocol and the shared
token-accounting step; one module per policy."""
from __future__ import annotations

from sim.core.instance.batching.base import BatchingPolicy, advance
from sim.core.instance.batching.continuous import ContinuousBatching
from sim.core.instance.batching.dynamic import DynamicBatching
from sim.core.instance.batching.static import StaticBatching
from sim.core.instance.kv_cache import BlockManager

POLICIES = {
    "static": StaticBatching,
    "dynamic": DynamicBatching,
    "continuous": lambda kv, **p: ContinuousBatching(kv, chunked_prefill=False, **p),
    "chunked_prefill": lambda kv, **p: ContinuousBatching(kv, chunked_prefill=True, **p),
}


def make_policy(name: str, kv: BlockManager, params: dict) -> BatchingPolicy:
    """Build the policy registered as `name` with its yaml parameters (minus `name`)."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown batching policy {name!r}; valid: {', '.join(POLICIES)}") from None
    return factory(kv, **params)


__all__ = ["BatchingPolicy", "POLICIES", "advance", "make_policy"]
