"""Fleet behaviour: cold starts, scale-down by draining, reactive vs predictive scaling, the overload ladder,
rolling updates, and dollars against hand arithmetic."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scenarios.workload import Workload
from inferplan.config.fleet import CHUNKED_LOAD_BYTES_PER_S
from sim.core.fleet.overload import BREAKER, FALLBACK, NORMAL, SCALE_UP, OverloadConfig, OverloadLadder
from sim.simulate import simulate

from tests.sim.helpers import run_config

SYNTH = ["cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0", "scenario.frontend_overhead_s=0"]
LLAMA3_8B_BF16_WEIGHT_BYTES = 16_060_522_496  # 8.03e9 parameters x 2 B (embeddings and LM head included)


def test_cold_start_delays_capacity_by_exactly_its_model():
    # No instance at t=0; the scheduled autoscaler asks for one at its first decision (t = 1 s). The instance
    # serves after provisioning (30 s) + chunked weight loading (16.06 GB / 15.9 GB/s) + warm-up (5 s).
    run = run_config(*SYNTH, "scenario.pools.main.instances=0", "+scenario.pools.main.max_instances=1",
                     "autoscaler=scheduled", "autoscaler.interval_s=1", "autoscaler.plan=[{at_s: 0, instances: 1}]")
    res = simulate(run, Workload.from_columns([0.0], [100], [1]))
    cold = 30.0 + LLAMA3_8B_BF16_WEIGHT_BYTES / CHUNKED_LOAD_BYTES_PER_S + 5.0
    assert res.summary["pools"]["main"]["weight_bytes"] == LLAMA3_8B_BF16_WEIGHT_BYTES
    # The request waits at the router until then, then takes one 10 ms iteration.
    assert res.requests["ttft_s"][0] == pytest.approx(1.0 + cold + 0.01, abs=1e-9)
    # Billing starts when the instance is asked for (t = 1 s), not when it serves.
    assert res.summary["pools"]["main"]["alive_instance_hours"] == pytest.approx((res.summary["simulated_duration_s"] - 1.0) / 3600)


def steady(rate_per_s: float, duration_s: float, seed: int, output_tokens: int = 20) -> Workload:
    rng = np.random.default_rng(seed)
    n = int(rate_per_s * duration_s)
    return Workload.from_columns(np.sort(rng.uniform(0, duration_s, n)), np.full(n, 64), np.full(n, output_tokens))


def test_scale_down_drains_and_never_drops_a_request():
    # Three instances until t = 100 s, then one: two drain while busy; every request still completes.
    run = run_config(*SYNTH, "scenario.pools.main.instances=3", "autoscaler=scheduled", "autoscaler.interval_s=5",
                     "autoscaler.plan=[{at_s: 0, instances: 3}, {at_s: 100, instances: 1}]")
    res = simulate(run, steady(20.0, 200.0, seed=1))
    assert res.summary["requests"]["completed"] == res.summary["requests"]["arrived"]
    rows = res.pools
    assert any(r["draining"] > 0 for r in rows)
    assert rows[-1]["active"] == 1
    # Before the scale-down all three served; once the two drained instances stopped, one instance serves all.
    early = res.requests["instance"][res.requests["arrival_s"] < 100]
    late = res.requests["instance"][res.requests["arrival_s"] > 110]
    assert len(np.unique(early)) == 3 and len(np.unique(late)) == 1


def load_step_workload(seed: int) -> Workload:
    # 5 req/s for 600 s, then 60 req/s for 600 s; each request 64 + 100 tokens at 10 ms per iteration.
    rng = np.random.default_rng(seed)
    low = np.sort(rng.uniform(0, 600, 3000))
    high = np.sort(rng.uniform(600, 1200, 36000))
    t = np.concatenate([low, high])
    return Workload.from_columns(t, np.full(t.size, 64), np.full(t.size, 100))


def first_scale_up_s(res) -> float:
    ups = [e for e in res.summary["fleet"]["scale_events"] if e[3] > e[2]]
    return ups[0][0] if ups else math.inf


def test_reactive_reacts_after_its_window_predictive_is_ready_before_the_step():
    common = [*SYNTH, "scenario.pools.main.instances=1", "+scenario.pools.main.max_instances=8",
              "batching.max_num_seqs=16"]
    reactive = simulate(run_config(*common, "autoscaler=reactive", "autoscaler.interval_s=10",
                                   "autoscaler.queue_per_instance=4"), load_step_workload(3))
    t_up = first_scale_up_s(reactive)
    assert 600 < t_up <= 600 + 2 * 10  # the queue builds within the step's first window, checked every 10 s
    predictive = simulate(run_config(*common, "autoscaler=predictive", "autoscaler.forecast=oracle",
                                     "autoscaler.interval_s=10", "autoscaler.requests_per_s_per_instance=12"),
                          load_step_workload(3))
    cold = 30.0 + LLAMA3_8B_BF16_WEIGHT_BYTES / CHUNKED_LOAD_BYTES_PER_S + 5.0
    t_pred = first_scale_up_s(predictive)
    assert t_pred + cold <= 600  # capacity serving before the step arrives
    at_step = [r for r in predictive.pools if r["t_s"] == 600.0][0]
    assert at_step["active"] >= 5  # ceil(60 x 1.2 / 12) = 6 asked for; at least 5 serving at the step
    p99_pred = np.nanpercentile(predictive.requests["ttft_s"][predictive.requests["arrival_s"] > 600], 99)
    p99_react = np.nanpercentile(reactive.requests["ttft_s"][reactive.requests["arrival_s"] > 600], 99)
    assert p99_pred < p99_react


def ladder(**kw) -> OverloadLadder:
    return OverloadLadder(OverloadConfig(enabled=True, window_s=10, min_samples=1, **kw))


def test_ladder_engages_and_releases_at_its_thresholds():
    lad = ladder()
    t = 0.0
    for tpot, expected in [(0.040, NORMAL), (0.051, SCALE_UP), (0.081, FALLBACK), (0.121, BREAKER)]:
        t += 11  # a fresh window for each level
        lad.observe_tpot(t, tpot)
        assert lad.update(t) == expected, tpot
    # Release with hysteresis: below 0.8 x the threshold of the level held.
    t += 11
    lad.observe_tpot(t, 0.100)  # below 120 ms but above 0.8 x 120 = 96 ms: the breaker holds
    assert lad.update(t) == BREAKER
    t += 11
    lad.observe_tpot(t, 0.060)  # < 96 ms releases the breaker, < 64 ms the fallback; > 40 ms keeps scale-up
    assert lad.update(t) == SCALE_UP
    t += 11
    lad.observe_tpot(t, 0.030)
    assert lad.update(t) == NORMAL
    assert [tr[2] for tr in lad.transitions] == [SCALE_UP, FALLBACK, BREAKER, SCALE_UP, NORMAL]


def test_overloaded_pool_falls_back_then_breaks_and_records_reasons():
    # One slow instance (10 ms per iteration, up to 64 sequences) under 3x its capacity; a fallback pool.
    run = run_config("cost=constant", "cost.step_time_s=0.2", "cost.per_token_s=0", "scenario.frontend_overhead_s=0",
                     "scenario.pools.main.instances=1",
                     "+scenario.pools.fallback={hardware: h100_sxm, model: llama3_8b, instances: 2}",
                     "+scenario.placement={name: static, default: [main]}",
                     "+scenario.overload={enabled: true, window_s: 5, fallback_pool: fallback, min_samples: 5}")
    res = simulate(run, steady(30.0, 120.0, seed=4))
    r = res.requests
    assert r["fallback"].sum() > 0 and set(r["pool"][r["fallback"]]) == {"fallback"}
    levels = [t[2] for t in res.summary["fleet"]["overload_transitions"]]
    assert FALLBACK in levels
    s = res.summary["requests"]
    assert s["completed"] + s["rejected"] + s["unfinished"] == s["arrived"]
    rejected = r["status"] == "rejected"
    assert set(r["reject_reason"][rejected]) <= {"circuit_breaker", "queue_full"}


def test_queue_cap_rejects_with_reason():
    run = run_config(*SYNTH, "scenario.pools.main.instances=1", "batching.max_num_seqs=1",
                     "+scenario.overload={max_queue_per_instance: 2}")
    wl = Workload.from_columns(np.zeros(6), np.full(6, 10), np.full(6, 50))
    r = simulate(run, wl).requests
    # All six arrive at t = 0, before the instance's first iteration: the first two wait (queue 0, then 1 < 2),
    # the other four find 2 waiting on the one instance, the cap, and are rejected.
    assert list(r["reject_reason"]) == ["", "", "queue_full", "queue_full", "queue_full", "queue_full"]


def test_cost_equals_hand_arithmetic():
    # 2 instances x $2.99/h for the simulated duration, per-second billing; hourly billing rounds each up.
    wl = steady(2.0, 100.0, seed=2)
    per_s = simulate(run_config(*SYNTH), wl).summary
    T = per_s["simulated_duration_s"]
    assert per_s["cost"]["usd"] == pytest.approx(2 * 2.99 * math.ceil(T) / 3600)
    hourly = simulate(run_config(*SYNTH, "scenario.billing_granularity_s=3600"), wl).summary
    assert hourly["cost"]["usd"] == pytest.approx(2 * 2.99)
    # Energy: per device, 100 W idle while alive + (700 - 100) W x busy time.
    busy_h = per_s["pools"]["main"]["busy_instance_hours"]
    assert per_s["cost"]["energy_kwh"] == pytest.approx((100 * 2 * T / 3600 + 600 * busy_h) / 1000)


def test_rolling_update_dips_capacity_and_drops_nothing():
    run = run_config(*SYNTH, "scenario.pools.main.instances=3", "+scenario.rolling_update={at_s: 50, wave_size: 1}")
    res = simulate(run, steady(10.0, 400.0, seed=6))
    assert res.summary["requests"]["completed"] == res.summary["requests"]["arrived"]
    active = [r["active"] for r in res.pools if r["t_s"] > 50]
    assert min(active) == 2 and active[-1] == 3
    assert res.summary["pools"]["main"]["instances_launched"] == 6


def test_active_list_follows_every_lifecycle_change():
    """`Pool.active` is kept between state changes (it is read for every request routed): scaling up, the end of
    a cold start, draining and stopping must each show in it at once."""
    import simpy

    from sim.core.fleet.pool import Pool

    run = run_config("scenario.pools.main.instances=2")
    env = simpy.Environment()
    pool = Pool(env, "main", run.pools["main"], run, on_finish=None, on_first_token=None)
    first, second = pool.instances
    assert pool.active == [first, second]
    pool.scale_to(3)  # a cold start: not active until it ends
    assert pool.active == [first, second] and pool.instances[2].state == "starting"
    env.run(until=pool.cold_start.total_s(pool.memory.weight_bytes) + 1.0)
    assert pool.active == pool.instances
    pool.scale_to(1)  # drains two (nothing held: they stop at once)
    assert len(pool.active) == 1 and all(i.state in ("draining", "stopped") for i in pool.instances
                                         if i not in pool.active)
    assert pool.active == [i for i in pool.instances if i.state == "active"]
