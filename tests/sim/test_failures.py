"""Instance failures (sim/core/fleet/failures.py): a failed instance's requests are re-routed, none lost; drawn
failures repeat per seed; a failure can break a tight SLO; spot pricing discounts the bill and its interruptions
are failures; bad `failures:` values are refused at load in one line."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from inferplan.errors import InputError
from scenarios.workload import Workload
from inferplan.config.fleet import CHUNKED_LOAD_BYTES_PER_S
from sim.core.fleet.failures import peak_s
from sim.simulate import simulate

from tests.sim.helpers import run_config

SYNTH = ["cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0", "scenario.frontend_overhead_s=0"]
LLAMA3_8B_COLD_START_S = 30.0 + 16_060_522_496 / CHUNKED_LOAD_BYTES_PER_S + 5.0  # provision + load + warm-up


def steady(rate_per_s: float, duration_s: float, seed: int, prompt: int = 64, output: int = 45) -> Workload:
    rng = np.random.default_rng(seed)
    n = int(rate_per_s * duration_s)
    return Workload.from_columns(np.sort(rng.uniform(0, duration_s, n)), np.full(n, prompt), np.full(n, output))


def failed_over(res) -> np.ndarray:
    r = res.requests
    return np.asarray(r["reject_reason"] == "instance_failure") & np.asarray(r["status"] != "rejected")


def test_a_given_failure_reroutes_every_request_it_held_and_loses_none():
    # Two instances, 16 req/s of 45-token answers (0.46 s each at 10 ms an iteration): each instance holds a few
    # requests at t = 20 s, when the busier one fails. Its requests finish on the other; nothing is lost.
    wl = steady(16.0, 60.0, seed=1)
    res = simulate(run_config(*SYNTH, "+scenario.pools.main.failures=[{at_s: 20, repair_s: 5}]"), wl)
    s = res.summary
    assert s["invariants"] == {"request_conservation": "ok", "kv_capacity": "ok", "clock_monotone": "ok",
                               "causality": "ok"}
    assert s["requests"]["completed"] == s["requests"]["arrived"] == len(wl)
    moved = failed_over(res)
    assert moved.sum() >= 2 and s["failures"]["requests_failed_over"] == moved.sum()
    f = s["failures"]["pools"]["main"]
    failed = f["instances"][0]
    assert f == {"count": 1, "times_s": [20.0], "instances": [failed], "causes": ["scheduled"],
                 "requests_failed_over": int(moved.sum()), "requests_rejected": 0}
    # They arrived before the failure, on the failed instance, and finished after it on the other one.
    r = res.requests
    assert (r["arrival_s"][moved] <= 20.0).all() and (r["finish_s"][moved] > 20.0).all()
    assert (r["instance"][moved] != failed).all()
    # The pool is one instance short from 20 s; the replacement is asked for at 25 s and serves one cold start
    # later (the time series' instance counts as they happen).
    rows = {row["t_s"]: row for row in res.pools}
    assert rows[20.0]["active"] == 1 and rows[24.0]["starting"] == 0 and rows[26.0]["starting"] == 1
    serving_again = 25.0 + LLAMA3_8B_COLD_START_S
    assert all(row["active"] == 1 for t, row in rows.items() if 20.0 <= t < serving_again)
    if max(rows) > serving_again + 1:
        assert rows[float(np.ceil(serving_again))]["active"] == 2


def test_the_failed_instances_requests_see_a_higher_ttft():
    # The same workload with and without the failure: every request moved off the failed instance before its first
    # token had to start its prompt over on the other instance, so it gets its first token later (long prompts: a
    # prefill is under way at the failure; with and without fast-forwarded runs alike).
    wl = lambda: steady(8.0, 60.0, seed=2, prompt=8000)  # noqa: E731 (a fresh workload per run)
    base = simulate(run_config(*SYNTH, "cost.per_token_s=2e-5"), wl())
    res = simulate(run_config(*SYNTH, "cost.per_token_s=2e-5", "+scenario.pools.main.failures=[{at_s: 30}]"), wl())
    moved = failed_over(res)
    late = moved & (np.asarray(res.requests["first_token_s"]) > 30.0)   # no first token when the instance failed
    assert late.sum() >= 1
    assert (res.requests["ttft_s"][late] > base.requests["ttft_s"][late]).all()
    assert (res.requests["e2e_s"][moved] > base.requests["e2e_s"][moved]).all()
    # A request that already had its first token keeps it (it was sent), and finishes later.
    early = moved & ~late
    np.testing.assert_array_equal(res.requests["first_token_s"][early], base.requests["first_token_s"][early])


def test_a_pool_with_no_instance_left_rejects_what_the_failed_one_held():
    res = simulate(run_config(*SYNTH, "scenario.pools.main.instances=1",
                              "+scenario.pools.main.failures=[{at_s: 10, repair_s: 0}]"), steady(8.0, 30.0, seed=3))
    s = res.summary
    r = res.requests
    rejected = np.asarray(r["status"] == "rejected")
    assert rejected.sum() >= 1 and set(r["reject_reason"][rejected]) == {"instance_failure"}
    assert s["requests"]["rejected_by_reason"] == {"instance_failure": int(rejected.sum())}
    assert s["failures"]["requests_rejected"] == int(rejected.sum()) and s["failures"]["requests_failed_over"] == 0
    assert s["invariants"]["request_conservation"] == "ok"
    assert s["requests"]["completed"] + s["requests"]["rejected"] == s["requests"]["arrived"]


def mtbf_run(seed: int):
    return simulate(run_config(*SYNTH, f"seed={seed}", "scenario.pools.main.instances=3",
                               "+scenario.pools.main.failures={mtbf_s: 40, repair_s: 5}"), steady(8.0, 90.0, seed=4))


def test_drawn_failures_are_the_same_for_the_same_seed_and_differ_for_another():
    a, b, c = mtbf_run(0), mtbf_run(0), mtbf_run(1)
    fa = a.summary["failures"]["pools"]["main"]
    assert fa["count"] >= 2 and set(fa["causes"]) == {"random"}
    assert fa == b.summary["failures"]["pools"]["main"]
    for col in ("instance", "first_token_s", "finish_s", "reject_reason", "status"):
        np.testing.assert_array_equal(np.asarray(a.requests[col]), np.asarray(b.requests[col]), err_msg=col)
    assert c.summary["failures"]["pools"]["main"]["times_s"] != fa["times_s"]
    for res in (a, c):
        assert set(res.summary["invariants"].values()) == {"ok"}


def test_a_failure_breaks_an_slo_that_a_tight_fleet_meets():
    # Two instances of 2 slots (10 ms iterations, 46 per request: ~4.3 req/s each) serve 6 req/s within a 1 s TTFT
    # P99; one alone cannot: after it loses its partner at 10 s (replaced only after the run) the queue grows.
    tight = [*SYNTH, "batching.max_num_seqs=2", "scenario.slo.ttft_p99_s=1.0"]
    ok = simulate(run_config(*tight), steady(6.0, 60.0, seed=5)).summary
    assert ok["slo"]["met"]["ttft_p99"] is True
    failed = simulate(run_config(*tight, "+scenario.pools.main.failures=[{at_s: 10, repair_s: 1000}]"),
                      steady(6.0, 60.0, seed=5)).summary
    assert failed["slo"]["met"]["ttft_p99"] is False and failed["failures"]["pools"]["main"]["count"] == 1


def test_spot_pricing_discounts_the_bill_and_its_interruptions_are_failures():
    wl = lambda: steady(4.0, 60.0, seed=6)  # noqa: E731
    on_demand = simulate(run_config(*SYNTH), wl()).summary
    spot = simulate(run_config(*SYNTH, "+scenario.pools.main.pricing=spot"), wl()).summary
    assert spot["pricing"]["main"]["kind"] == "spot" and on_demand["pricing"]["main"]["kind"] == "on_demand"
    assert spot["cost"]["usd"] == pytest.approx(on_demand["cost"]["usd"] * (1 - 0.65))   # conf/config.yaml default
    assert spot["pools"]["main"]["usd_per_instance_hour"] == pytest.approx(2.99 * 0.35)
    reserved = simulate(run_config(*SYNTH, "+scenario.pools.main.pricing=reserved",
                                   "+scenario.pools.main.reserved_discount=0.5"), wl()).summary
    assert reserved["cost"]["usd"] == pytest.approx(on_demand["cost"]["usd"] * 0.5)
    interrupted = simulate(run_config(*SYNTH, "+scenario.pools.main.pricing=spot",
                                      "+scenario.pools.main.spot_interruption_mtbf_s=30"), wl()).summary
    f = interrupted["failures"]["pools"]["main"]
    assert f["count"] >= 1 and set(f["causes"]) == {"spot"}
    assert interrupted["pools"]["main"]["instances_launched"] == 2 + f["count"]   # each replaced at once
    assert interrupted["cost"]["usd"] < on_demand["cost"]["usd"]
    assert set(interrupted["invariants"].values()) == {"ok"}


def test_the_peak_is_the_busiest_bin_or_ten_percent_into_a_flat_workload():
    rng = np.random.default_rng(7)
    flat = np.sort(rng.uniform(0, 1000, 20000))
    assert peak_s(flat) == pytest.approx(flat[0] + 0.1 * (flat[-1] - flat[0]))
    surge = np.sort(np.concatenate([flat, rng.uniform(600, 650, 3000)]))   # 3,000 more in 600-650 s
    assert 550 <= peak_s(surge) <= 650


@pytest.mark.parametrize("failures, field", [
    ("{mtbf_s: -1}", "pools.main.failures.mtbf_s"),
    ("{mtbf_s: 100, repiar_s: 5}", "pools.main.failures.repiar_s"),
    ("[{at_s: 10, instances: 0}]", "pools.main.failures[0].instances"),
    ("[{at_s: soon}]", "pools.main.failures[0].at_s"),
    ("[{instances: 1}]", "pools.main.failures[0].at_s"),
    ("[{at_s: 5, repair_s: -2}]", "pools.main.failures[0].repair_s"),
    ("7", "pools.main.failures"),
])
def test_bad_failures_values_are_refused_at_load(failures, field):
    with pytest.raises(InputError) as err:
        run_config(*SYNTH, f"+scenario.pools.main.failures={failures}")
    assert err.value.file == "scenario/smoke" and err.value.field == field
    assert "\n" not in str(err.value) and "(fix: " in str(err.value)


@pytest.mark.parametrize("overrides, field", [
    (["+scenario.pools.main.pricing=cheap"], "pools.main.pricing"),
    (["+scenario.pools.main.pricing=spot", "+scenario.pools.main.spot_discount=1.2"], "pools.main.spot_discount"),
    (["+scenario.pools.main.spot_interruption_mtbf_s=60"], "pools.main.spot_interruption_mtbf_s"),
    (["+scenario.pools.main.redundancy=n+2"], "pools.main.redundancy"),
])
def test_bad_pricing_and_redundancy_are_refused_at_load(overrides, field):
    with pytest.raises(InputError) as err:
        run_config(*SYNTH, *overrides)
    assert err.value.field == field


def test_bad_failures_give_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sim", "scenario=smoke", "metrics.progress=false",
                           "+scenario.pools.main.failures={mtbf_s: 0}"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: scenario/smoke: pools.main.failures.mtbf_s: must be > 0, got 0 (fix: use a positive value)"]
