"""Batching policies (key = yaml name in `conf/batching/`): `base.py` holds the protocol and the shared
token-accounting step; one module per policy."""
from __future__ import annotations

from sim.core.instance.batching.base import BatchingPolicy, advance
from sim.core.instance.batching.continuous import ChunkedPrefillBatching, ContinuousBatching
from sim.core.instance.batching.dynamic import DynamicBatching
from sim.core.instance.batching.static import StaticBatching
from sim.core.instance.kv_cache import BlockManager

POLICIES: dict[str, type[BatchingPolicy]] = {
    "static": StaticBatching,
    "dynamic": DynamicBatching,
    "continuous": ContinuousBatching,
    "chunked_prefill": ChunkedPrefillBatching,
}


def policy_class(name: str) -> type[BatchingPolicy]:
    """The class registered as `name` (a KeyError naming the valid ones otherwise)."""
    try:
        return POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown batching policy {name!r}; valid: {', '.join(POLICIES)}") from None


def make_policy(name: str, kv: BlockManager, params: dict) -> BatchingPolicy:
    """Build the policy registered as `name` with its yaml parameters (minus `name`)."""
    return policy_class(name)(kv, **params)


__all__ = ["BatchingPolicy", "POLICIES", "advance", "make_policy", "policy_class"]
