"""Batching policies on hand-computable workloads (synthetic 10 ms iterations), and preemption under KV pressure.

Every expected time below is derived in the comments from the policy's rules with a 10 ms step.
"""
from __future__ import annotations


from scenarios.workload import Workload
from sim.simulate import simulate

from tests.sim.helpers import run_config

STEP = ["cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0", "scenario.frontend_overhead_s=0",
        "scenario.pools.main.instances=1"]
# A: arrives 0, 10 prompt tokens, 3 output tokens. B: arrives 5 ms, 10 prompt, 2 output.
AB = Workload.from_columns([0.0, 0.005], [10, 10], [3, 2])


def times(res):
    r = res.requests
    return [(round(a, 6), round(b, 6)) for a, b in zip(r["ttft_s"], r["e2e_s"])]


def test_continuous_batching_by_hand():
    # t=0   [A prefill]            -> 0.01: A token 1.   B arrived at 0.005 and waits for the next iteration.
    # t=.01 [A decode, B prefill]  -> 0.02: A token 2, B token 1.
    # t=.02 [A decode, B decode]   -> 0.03: A token 3 (done), B token 2 (done).
    res = simulate(run_config(*STEP, "batching=continuous"), AB)
    assert times(res) == [(0.01, 0.03), (0.015, 0.025)]


def test_static_batching_by_hand():
    # batch_size 2: A waits for B (arrives 0.005), then [A, B prefill] -> 0.015: both token 1;
    # [A, B decode] -> 0.025: A token 2, B token 2 (done); [A decode] -> 0.035: A done. Nobody joins mid-way.
    res = simulate(run_config(*STEP, "batching=static", "batching.batch_size=2", "batching.timeout_s=1"), AB)
    assert times(res) == [(0.015, 0.035), (0.01, 0.02)]


def test_static_batch_timeout_by_hand():
    # batch_size 4 never fills: the batch starts when A has waited 50 ms (t=0.05) with A and B;
    # [A,B prefill] -> .06, [A,B decode] -> .07 (B done), [A decode] -> .08.
    res = simulate(run_config(*STEP, "batching=static", "batching.batch_size=4", "batching.timeout_s=0.05"), AB)
    assert times(res) == [(0.06, 0.08), (0.055, 0.065)]


def test_static_batch_runs_to_completion_before_the_next():
    # batch_size 1: A alone 0 -> 0.03 (3 iterations); B waits until A's batch ends, then 0.03 -> 0.05.
    res = simulate(run_config(*STEP, "batching=static", "batching.batch_size=1", "batching.timeout_s=1"), AB)
    assert times(res) == [(0.01, 0.03), (0.035, 0.045)]


def test_dynamic_batching_by_hand():
    # No adaptation: the oldest request (A) may wait max_wait_s = 50 ms; both then form one length bucket.
    res = simulate(run_config(*STEP, "batching=dynamic", "batching.adaptive_wait=false"), AB)
    assert times(res) == [(0.06, 0.08), (0.055, 0.065)]


def test_dynamic_batching_buckets_by_length():
    # max_batch_tokens 20 with min_batch_size 1: prompts 10, 10 fit one bucket, a 30-token prompt is alone.
    from sim.core.instance.batching.dynamic import length_buckets
    from sim.core.instance.request_state import SimRequest
    reqs = [SimRequest(i, 0.0, p, 1) for i, p in enumerate([30, 10, 12, 8])]
    buckets = length_buckets(reqs, max_batch_size=32, max_batch_tokens=20, min_batch_size=1)
    assert [[r.prompt_tokens for r in b] for b in buckets] == [[8, 10], [12], [30]]
    # With min_batch_size 2 the lone 12-token bucket merges into its neighbour only when the caps allow:
    # [8, 10] + [12] = 30 tokens > 20, so it stays; [12] + [30] > 20 too.
    merged = length_buckets(reqs, max_batch_size=32, max_batch_tokens=20, min_batch_size=2)
    assert [[r.prompt_tokens for r in b] for b in merged] == [[8, 10], [12], [30]]
    merged = length_buckets(reqs, max_batch_size=32, max_batch_tokens=100, min_batch_size=2)
    assert [[r.prompt_tokens for r in b] for b in merged] == [[8, 10, 12, 30]]


def test_chunked_prefill_by_hand():
    # token_budget 8: A's 10-token prompt runs as chunks of 8 and 2 -> first token at 0.02, done at 0.04.
    # B (arrives .005) gets the 6 tokens left in A's second iteration (t=.01: [A:2, B:6]), its last 4 at t=.02
    # with A's decode ([A:1, B:4]) -> B token 1 at .03; [A:1, B:1] -> .04: A done, B token 2 (done).
    res = simulate(run_config(*STEP, "batching=chunked_prefill", "batching.token_budget=8"), AB)
    assert times(res) == [(0.02, 0.04), (0.025, 0.035)]


def test_preemption_recomputes_and_counts():
    # 4 KV blocks of 16 tokens = 64 tokens. Two requests of 20 prompt + 30 output tokens need 49 tokens each:
    # both start, then decode runs out of blocks and the later one is preempted, recomputed after A finishes.
    wl = Workload.from_columns([0.0, 0.0], [20, 20], [30, 30])
    res = simulate(run_config(*STEP, "batching=continuous", "+scenario.pools.main.num_gpu_blocks_override=4"), wl)
    r = res.requests
    assert list(r["status"]) == ["completed", "completed"]
    assert r["preemptions"][0] == 0 and r["preemptions"][1] >= 1
    assert res.summary["invariants"]["kv_capacity"] == "ok"
    assert r["finish_s"][1] > r["finish_s"][0]
