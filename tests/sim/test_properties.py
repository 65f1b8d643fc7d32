"""Property tests: random small scenarios x every batching and routing policy keep the named invariants."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenarios.workload import Workload
from sim.core.instance.batching import POLICIES
from sim.core.router import ROUTERS
from sim.simulate import simulate

from tests.sim.helpers import run_config


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 25))
    gaps = draw(st.lists(st.floats(0.0, 0.05), min_size=n, max_size=n))
    prompts = draw(st.lists(st.integers(1, 120), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    shared = draw(st.booleans())
    # Prefix hashes: with `shared`, every prompt starts with the same 32-token block (hash 7).
    hashes = [np.array(([7] if shared else []) + [1000 + 10 * i + j for j in range(p // 32)], dtype=np.int64)[: p // 32]
              for i, p in enumerate(prompts)]
    return Workload.from_columns(np.cumsum(gaps), prompts, outputs, prefix_hashes=hashes, hash_block_tokens=32)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wl=workloads(), batching=st.sampled_from(sorted(POLICIES)), router=st.sampled_from(sorted(ROUTERS)),
       instances=st.integers(1, 3), blocks=st.integers(12, 40), prefix=st.booleans())
def test_invariants_hold_for_every_policy(wl, batching, router, instances, blocks, prefix):
    run = run_config("cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0.0001", f"batching={batching}",
                     f"router={router}", f"scenario.pools.main.instances={instances}",
                     f"+scenario.pools.main.num_gpu_blocks_override={blocks}",
                     f"+scenario.pools.main.prefix_caching={str(prefix).lower()}", "scenario.drain_timeout_s=1000")
    res = simulate(run, wl)
    assert res.summary["invariants"] == {"request_conservation": "ok", "kv_capacity": "ok",
                                         "clock_monotone": "ok", "causality": "ok"}
    r = res.requests
    # 12 blocks of 16 tokens hold any single request here (<= 159 tokens), so nothing is rejected or stuck.
    assert list(r["status"]) == ["completed"] * len(wl)
    assert np.all(r["arrival_s"] <= r["first_token_s"]) and np.all(r["first_token_s"] <= r["finish_s"])
    assert np.all(r["cached_tokens"] < r["prompt_tokens"])
    if not prefix:
        assert np.all(r["cached_tokens"] == 0)
