"""A second KV tier shared by every instance of a pool (DeepSeek's 3FS KVCache): a prefix one instance
prefilled is hit on another, loaded at the reader's bandwidth; the tier evicts least recently used first."""
from __future__ import annotations

import numpy as np
import pytest

from scenarios.workload import Workload
from sim.core.instance.kv_cache import BlockManager, SharedKVTier
from sim.simulate import simulate

from tests.sim.helpers import Requests, run_config

R = Requests()  # the requests of the block managers' calls, by id: fresh for each test


@pytest.fixture(autouse=True)
def _fresh_requests():
    R.clear()


def _prefill(kv: BlockManager, rid: int, hashes: list[int], tokens: int) -> tuple[int, float]:
    """One request through the prefix cache as an instance runs it: match, allocate, publish, finish."""
    got = kv.match_prefix(R[rid], hashes, tokens)
    assert kv.grow(R[rid], tokens)
    kv.publish(R[rid], hashes, tokens)
    kv.free(R[rid])
    return got


def _unit(tier: SharedKVTier) -> BlockManager:
    # 8 blocks of 512 tokens (= one hash block), 1,000 B of KV per token, read from the tier at 1 GB/s.
    return BlockManager(8, 512, prefix_caching=True, hash_block_tokens=512, kv_bytes_per_token=1000.0,
                        tier2_capacity_bytes=1e12, tier2_bandwidth_bytes_per_s=1e9, shared_tier=tier)


def test_a_prefix_written_by_one_instance_is_hit_on_another_with_the_load_time():
    tier = SharedKVTier(1e12, 512 * 1000.0)
    a, b = _unit(tier), _unit(tier)
    assert _prefill(a, 1, [10, 11], 1100) == (0, 0.0)
    assert list(tier._lru) == [10, 11] and tier.writes == 2
    assert b.cached_prefix_entries([10, 11]) == 0  # not on B's device ...
    cached, load_s = b.match_prefix(R[2], [10, 11, 12], 1600)
    # ... but in the shared tier: 2 entries x 512 tokens x 1,000 B / 1 GB/s = 1.024 ms of loading.
    assert cached == 1024 and load_s == pytest.approx(2 * 512 * 1000 / 1e9)
    assert b.tier2_hits_tokens == 1024 and b.hits_tokens == 1024
    assert list(tier._lru) == [10, 11]  # the shared tier keeps its copy
    # Back on A, the entries are still on the device: a hit with nothing to load.
    assert a.match_prefix(R[3], [10, 11], 1100) == (1024, 0.0)
    assert a.tier2_hits_tokens == 0


def test_without_the_shared_tier_another_instance_misses():
    a = BlockManager(8, 512, prefix_caching=True, hash_block_tokens=512, kv_bytes_per_token=1000.0,
                     tier2_capacity_bytes=1e12, tier2_bandwidth_bytes_per_s=1e9)
    b = BlockManager(8, 512, prefix_caching=True, hash_block_tokens=512, kv_bytes_per_token=1000.0,
                     tier2_capacity_bytes=1e12, tier2_bandwidth_bytes_per_s=1e9)
    _prefill(a, 1, [10, 11], 1100)
    assert b.match_prefix(R[2], [10, 11, 12], 1600) == (0, 0.0)


def test_capacity_evicts_the_least_recently_used_entry():
    tier = SharedKVTier(3 * 512 * 1000.0, 512 * 1000.0)  # room for 3 entries
    assert tier.capacity_entries == 3
    a, b = _unit(tier), _unit(tier)
    _prefill(a, 1, [1], 512)
    _prefill(a, 2, [2], 512)
    _prefill(b, 3, [3], 512)
    assert list(tier._lru) == [1, 2, 3]
    b.match_prefix(R[4], [1], 600)  # B reads 1 from the tier: 1 is now the most recently used
    b.free(R[4])
    assert list(tier._lru) == [2, 3, 1]
    _prefill(b, 5, [4], 512)  # a fourth entry: 2, the least recently used, goes
    assert list(tier._lru) == [3, 1, 4] and tier.evictions == 1
    assert b.match_prefix(R[6], [2], 600) == (0, 0.0)  # on neither B's device nor the tier


def test_a_device_hit_refreshes_the_entry_in_the_shared_tier():
    tier = SharedKVTier(2 * 512 * 1000.0, 512 * 1000.0)
    a = _unit(tier)
    _prefill(a, 1, [1], 512)
    _prefill(a, 2, [2], 512)
    a.match_prefix(R[3], [1], 600)  # on A's device; the tier sees the use too
    a.free(R[3])
    assert list(tier._lru) == [2, 1]


# 1 ms per iteration plus 0.1 ms per computed token; two instances taking turns.
COST = ["cost=constant", "cost.step_time_s=0.001", "cost.per_token_s=0.0001", "scenario.frontend_overhead_s=0",
        "scenario.pools.main.instances=2", "router=round_robin", "+scenario.pools.main.prefix_caching=true",
        "+scenario.pools.main.kv_tier2_bytes=1e12", "+scenario.pools.main.kv_tier2_bandwidth_bytes_per_s=1e9"]
# Llama-3-8B in BF16: 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B of KV per token.
KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2


def two_turns() -> Workload:
    # Turn 2 (1 s later) repeats turn 1's two 512-token blocks and adds a third; round robin sends it to the
    # other instance.
    return Workload.from_columns([0.0, 1.0], [1100, 1600], [4, 4],
                                 prefix_hashes=[np.array([1, 2]), np.array([1, 2, 3])], hash_block_tokens=512)


def test_in_a_run_the_next_turn_hits_on_the_other_instance():
    shared = simulate(run_config(*COST, "+scenario.pools.main.kv_tier2_shared=true"), two_turns())
    r = shared.requests
    assert list(r["cached_tokens"]) == [0, 1024]
    # 576 tokens computed, 1,024 loaded at 1 GB/s: TTFT = 1 ms + 576 x 0.1 ms + 1,024 x 131,072 B / 1e9 B/s.
    assert r["ttft_s"][1] == pytest.approx(0.001 + 576 * 0.0001 + 1024 * KV_BYTES_PER_TOKEN / 1e9)
    assert shared.summary["pools"]["main"]["prefix_cache"]["tier2_hit_tokens"] == 1024
    own = simulate(run_config(*COST), two_turns()).requests  # one tier per instance: the other one misses
    assert list(own["cached_tokens"]) == [0, 0]
    assert own["ttft_s"][1] == pytest.approx(0.001 + 1600 * 0.0001)


@pytest.mark.parametrize("pool", [{"kv_tier2_shared": True, "prefix_caching": True},
                                  {"kv_tier2_shared": True, "kv_tier2_bytes": 1e12}])
def test_a_shared_tier_of_no_size_or_without_prefix_caching_is_refused_at_load(pool):
    from inferplan.errors import InputError
    from sim.compose import compose_config
    from sim.config import load_run_config

    args = ["scenario=smoke", *(f"+scenario.pools.main.{k}={v}" for k, v in pool.items())]
    with pytest.raises(InputError, match=r"pools\.main\.kv_tier2_shared: needs prefix_caching: true and kv_tier2_bytes"):
        load_run_config(compose_config(args))
