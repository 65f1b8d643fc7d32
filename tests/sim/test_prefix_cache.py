"""Prefix caching: hits skip prefill compute and are recorded; LRU eviction; a second tier with a load cost."""
from __future__ import annotations

import numpy as np
import pytest

from scenarios.workload import Workload
from sim.core.instance.kv_cache import BlockManager
from sim.simulate import simulate

from tests.sim.helpers import Requests, run_config

R = Requests()  # the requests of the block managers' calls, by id: fresh for each test


@pytest.fixture(autouse=True)
def _fresh_requests():
    R.clear()

# 1 ms per iteration plus 0.1 ms per computed token: prefill time is visible in TTFT.
COST = ["cost=constant", "cost.step_time_s=0.001", "cost.per_token_s=0.0001", "scenario.frontend_overhead_s=0",
        "scenario.pools.main.instances=1"]


def two_turns(second_arrival_s: float) -> Workload:
    # Turn 2 repeats turn 1's first two 512-token blocks (hashes 1, 2) and adds a third block.
    return Workload.from_columns([0.0, second_arrival_s], [1100, 1600], [4, 4],
                                 prefix_hashes=[np.array([1, 2]), np.array([1, 2, 3])], hash_block_tokens=512)


def test_hit_skips_prefill_compute_and_is_recorded():
    res = simulate(run_config(*COST, "+scenario.pools.main.prefix_caching=true"), two_turns(1.0))
    r = res.requests
    assert list(r["cached_tokens"]) == [0, 1024]
    # Turn 2 computes 1600 - 1024 = 576 tokens: TTFT = 1 ms + 576 x 0.1 ms.
    assert r["ttft_s"][1] == pytest.approx(0.001 + 576 * 0.0001)
    off = simulate(run_config(*COST), two_turns(1.0)).requests
    assert off["cached_tokens"][1] == 0
    assert off["ttft_s"][1] == pytest.approx(0.001 + 1600 * 0.0001)
    assert res.summary["pools"]["main"]["prefix_cache"]["hit_tokens"] == 1024


def test_whole_prompt_cached_still_computes_one_token():
    wl = Workload.from_columns([0.0, 1.0], [1024, 1024], [2, 2], prefix_hashes=[np.array([5, 6])] * 2,
                               hash_block_tokens=512)
    r = simulate(run_config(*COST, "+scenario.pools.main.prefix_caching=true"), wl).requests
    assert list(r["cached_tokens"]) == [0, 1023]


def test_lru_eviction_and_second_tier_load_cost():
    # 4 blocks of 512 tokens each (block size 512 = hash block). Four one-block prompts leave four entries.
    kv = BlockManager(4, 512, prefix_caching=True, hash_block_tokens=512, kv_bytes_per_token=1000.0,
                      tier2_capacity_bytes=1e12, tier2_bandwidth_bytes_per_s=1e9)
    for rid, h in enumerate([10, 11, 12, 13]):
        assert kv.match_prefix(R[rid], [h], 512) == (0, 0.0)
        assert kv.grow(R[rid], 512)  # its one block becomes the cache entry on publish
        kv.publish(R[rid], [h], 512)
        kv.free(R[rid])
        assert kv.used_blocks <= kv.num_blocks
    assert kv.cached_entries == 4 and kv.used_blocks == 4
    # A request needing 2 own blocks evicts the two least recently used entries (10, 11) to tier 2.
    assert kv.grow(R[99], 1000)
    assert kv.cached_prefix_entries([12]) == 1 and kv.cached_prefix_entries([10]) == 0
    kv.free(R[99])
    # Hash 10 now comes back from tier 2: 512 tokens x 1000 B / 1 GB/s = 0.512 ms of loading.
    cached, load_s = kv.match_prefix(R[7], [10], 600)
    assert cached == 512 and load_s == pytest.approx(512 * 1000 / 1e9)
    assert kv.tier2_hits_tokens == 512


def test_failed_allocation_changes_nothing():
    kv = BlockManager(3, 16)
    assert kv.grow(R[1], 40)  # 3 blocks
    assert not kv.grow(R[2], 1)
    assert kv.used_blocks == 3 and kv.held(R[2]) == 0


def test_reload_from_a_full_second_tier_keeps_the_entry():
    """Reloading an entry may evict others into a full tier 2; the entry being reloaded must not be trimmed.

    Two 1-token blocks, a tier 2 of one entry. Prompts [1], [2], [3] each leave their entry cached, pushing the
    previous one to tier 2 (which keeps only the newest): tier 2 = {2}, device = {3} + a free block. Request 10
    takes the free block; reloading 2 must evict 3 into tier 2 (trimming tier 2), and 2 must survive that."""
    kv = BlockManager(2, 1, prefix_caching=True, hash_block_tokens=1, kv_bytes_per_token=1.0,
                      tier2_capacity_bytes=1.0, tier2_bandwidth_bytes_per_s=1.0)
    for rid, h in enumerate([[1], [2], [3]]):
        kv.match_prefix(R[rid], h, 2)
        kv.grow(R[rid], 2)
        kv.publish(R[rid], h, 2)
        kv.free(R[rid])
    assert kv.grow(R[10], 1)
    cached, load_s = kv.match_prefix(R[11], [2], 2)
    assert (cached, load_s) == (1, 1.0)  # 1 token of 1 B over 1 B/s
    assert kv.used_blocks == kv.num_blocks == 2
    assert kv.cached_prefix_entries([2]) == 1 and kv.cached_prefix_entries([3]) == 0
    assert list(kv._tier2) == [3]


def test_second_tier_hit_without_device_room_leaves_the_tier_as_it_was():
    """Three 1-token blocks, a tier 2 of ten entries. Prompts [1], [2], [3] leave entries 2 and 3 on the device
    and 1 in tier 2; a request holding all three blocks pushes 2 and 3 down too: tier 2 = 1, 2, 3 (oldest
    first). A hit on 2 then finds no room on the device (nothing evictable): the match stops, skips nothing, and
    tier 2 keeps its entries in their LRU order."""
    kv = BlockManager(3, 1, prefix_caching=True, hash_block_tokens=1, kv_bytes_per_token=1.0,
                      tier2_capacity_bytes=10.0, tier2_bandwidth_bytes_per_s=1.0)
    for rid, h in enumerate([[1], [2], [3]]):
        kv.match_prefix(R[rid], h, 2)
        assert kv.grow(R[rid], 2)
        kv.publish(R[rid], h, 2)
        kv.free(R[rid])
    assert list(kv._tier2) == [1]
    assert kv.grow(R[10], 3)
    assert list(kv._tier2) == [1, 2, 3] and kv.used_blocks == 3
    assert kv.match_prefix(R[11], [2], 2) == (0, 0.0)
    assert list(kv._tier2) == [1, 2, 3] and kv.used_blocks == 3 and kv.tier2_hits_tokens == 0


def test_active_utilization_ignores_evictable_entries():
    kv = BlockManager(4, 512, prefix_caching=True, hash_block_tokens=512)
    kv.match_prefix(R[1], [9], 512)
    kv.grow(R[1], 512)
    kv.publish(R[1], [9], 512)
    assert kv.utilization == kv.active_utilization == 0.25
    kv.free(R[1])  # the entry stays cached but nobody holds it
    assert kv.utilization == 0.25 and kv.active_utilization == 0.0
