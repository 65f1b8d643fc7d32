"""Batching policies (key = yaml name in `conf/batching/`). Read first: `scheduler.py`, the one iteration-level
scheduler whose rules (`rules.py`) are settings: engine presets build it with theirs, and `continuous` and
`chunked_prefill` are presets of it (`presets.py`); `static.py` and `dynamic.py`, request-level batching, run
over the same steps (`base.py`: the protocol, token accounting, prefix matching, steady decode runs)."""
from __future__ import annotations

from sim.core.instance.batching.base import BatchingPolicy, PolicyFactory, advance
from sim.core.instance.batching.dynamic import DynamicBatching
from sim.core.instance.batching.presets import CHUNKED_PREFILL, CONTINUOUS
from sim.core.instance.batching.scheduler import Scheduler
from sim.core.instance.batching.static import StaticBatching
from sim.core.instance.kv_cache import BlockManager

POLICIES: dict[str, PolicyFactory] = {
    "static": StaticBatching,
    "dynamic": DynamicBatching,
    "continuous": CONTINUOUS,
    "chunked_prefill": CHUNKED_PREFILL,
}


def policy_class(name: str) -> PolicyFactory:
    """The factory registered as `name` (a KeyError naming the valid ones otherwise): a policy class or a
    `Scheduler` preset, each with `whole_prompt_limit(params)`."""
    try:
        return POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown batching policy {name!r}; valid: {', '.join(POLICIES)}") from None


def make_policy(name: str, kv: BlockManager, params: dict) -> BatchingPolicy:
    """Build the policy registered as `name` with its yaml parameters (minus `name`)."""
    return policy_class(name)(kv, **params)


__all__ = ["BatchingPolicy", "POLICIES", "PolicyFactory", "Scheduler", "advance", "make_policy", "policy_class"]
