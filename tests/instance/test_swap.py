"""Swap preemption (vLLM V0 `preemption_mode=swap`) with hand-computed times: iterations of T = 14 ms (the
two-part synthetic cost of test_engine_host), KV of 1e5 bytes per token over a 1 GB/s host link, so moving a
16-token request's KV takes x = 16 x 1e5 / 1e9 = 1.6 ms."""
from __future__ import annotations

import pytest
import simpy

from sim.core.instance.batching.engine import EngineBatching
from sim.core.instance.instance import Instance
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest

from tests.instance.test_engine_host import GPU_S, HOST_S, SplitCost

T, X = GPU_S + HOST_S, 16 * 1e5 / 1e9
V0 = dict(max_num_seqs=8, max_num_batched_tokens=1024, chunked_prefill=False, iteration="prefill_priority")


def run(swap_space_bytes: float):
    # 3 blocks of 16 tokens. A and B (prompt 16, output 10) arrive at 0 and are prefilled together (1 block each).
    env = simpy.Environment()
    kv = BlockManager(3, 16, kv_bytes_per_token=1e5)
    policy = EngineBatching(kv, preemption="swap", swap_bandwidth_bytes_per_s=1e9, swap_space_bytes=swap_space_bytes,
                            **V0)
    done: dict[int, float] = {}
    inst = Instance(env, "p", 0, policy, kv, SplitCost(), lambda r: done.setdefault(r.request_id, r.finish_s),
                    fast_forward=False)
    inst.state = "active"
    for i in range(2):
        inst.submit(SimRequest(i, 0.0, 16, 10), 0.0)
    env.run()
    return done, policy, kv


def test_swap_out_and_in_are_priced_over_the_host_link():
    # t=T: both have token 1 and need a second block for token 2; only one is free: A grows, B (the last admitted)
    # is swapped out in that iteration: [decode A] + x -> 2T + x. A's tokens 3..10: done at 10T + x. Its blocks
    # free, B is swapped in (+x) and decodes token 2 -> 11T + 2x; tokens 3..10: done at 19T + 2x.
    done, policy, kv = run(swap_space_bytes=4 * 2**30)
    assert done[0] == pytest.approx(10 * T + X, abs=1e-12)
    assert done[1] == pytest.approx(19 * T + 2 * X, abs=1e-12)
    assert (policy.swaps_out, policy.swaps_in, policy.swapped_bytes) == (1, 1, 0.0)
    assert kv.free_blocks == kv.num_blocks


def test_no_prefill_is_admitted_while_a_request_is_swapped_out():
    env = simpy.Environment()
    kv = BlockManager(3, 16, kv_bytes_per_token=1e5)
    policy = EngineBatching(kv, preemption="swap", swap_bandwidth_bytes_per_s=1e9, swap_space_bytes=1e9, **V0)
    back = SimRequest(9, 0.0, 16, 10)
    back.num_computed_tokens, back.num_output_tokens = 16, 1  # (swapped out after its first token)
    policy.swapped.append(back)
    policy.add_request(SimRequest(1, 0.0, 16, 10), 0.0)
    out = policy.schedule(0.0)
    # The prompt waits; the swapped request comes back first (its 16 tokens moved in: x), decoding.
    assert out is not None and [r.request_id for r, _ in out.items] == [9] and out.load_s == pytest.approx(X)


def test_a_victim_that_does_not_fit_the_swap_space_is_recomputed():
    # Swap space below 16 tokens' KV: B is recomputed instead. It re-prefills its 17 known tokens (2 blocks) only
    # when A has finished at 10T (no transfer): token 2 at 11T, done at 19T.
    done, policy, _ = run(swap_space_bytes=1.0)
    assert done[0] == pytest.approx(10 * T, abs=1e-12) and done[1] == pytest.approx(19 * T, abs=1e-12)
    assert policy.swaps_out == 0 and policy.preemptions == 1


def test_swap_needs_a_host_link():
    with pytest.raises(ValueError, match="host link"):
        EngineBatching(BlockManager(3, 16), preemption="swap", **V0)
