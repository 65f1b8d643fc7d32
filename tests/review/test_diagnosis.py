"""The diagnosis: window, cause and knobs from a run's evidence, one synthetic run per cause; then real runs
(code_assistant, reduced) for prefill interference, its knob, and a partial run."""
import os
import signal

import numpy as np
import pytest

from inferplan.labels import Labels
from sim.config import SloConfig
from sim.review.diagnosis import diagnose
from sim.review.evidence import BatchingFacts, PoolFacts, RunEvidence
from sim.results.text import finding_lines, wrap
from sim.review.verdict import verdicts

SLO = SloConfig(ttft_p99_s=1.0, tpot_p99_s=0.05, served_fraction=0.9)
T_END = 600.0


def _run(slow=lambda t: False, *, ttft_slow=False, active=lambda t: 10, queued=lambda t: 0, starting=lambda t: 0,
         autoscaler="fixed", pool="p", routes=None, preempted=False, fallback=False, scale_events=(),
         instance_times=(), running=lambda t: 30, instances_of=lambda i: i % 10, batching=None, partial=False,
         kv_dtype="bf16"):
    """One class `qa` on `pool`, 20 req/s for 600 s, 1,000-token prompts, request i on instance instances_of(i);
    requests arriving at t with slow(t) get TPOT 0.1 s (or TTFT 3 s with ttft_slow) instead of 0.02 s / 0.2 s."""
    arrival = np.arange(0.0, T_END, 0.05)
    n = arrival.size
    is_slow = np.array([slow(t) for t in arrival])
    ttft = np.where(is_slow & ttft_slow, 3.0, 0.2)
    tpot = np.where(is_slow & ~np.array(ttft_slow), 0.1, 0.02)
    first = arrival + ttft
    cols = {"request_class": Labels.of(["qa"] * n), "pool": Labels.of([pool] * n),
            "status": Labels.of(["completed"] * n), "arrival_s": arrival, "first_token_s": first,
            "finish_s": first + 99 * tpot, "ttft_s": ttft, "tpot_s": tpot, "itl_max_s": tpot * 2,
            "preemptions": (is_slow & preempted).astype(np.int32), "fallback": is_slow & fallback,
            "reject_reason": Labels.of([""] * n), "instance": np.array([instances_of(i) for i in range(n)]),
            "prompt_tokens": np.full(n, 1000), "cached_tokens": np.zeros(n, dtype=np.int64)}
    t = np.arange(1.0, T_END + 1)
    series = {pool: {"t_s": t, "active": np.array([active(x) for x in t], float),
                     "starting": np.array([starting(x) for x in t], float),
                     "queued": np.array([queued(x) for x in t], float),
                     "running": np.array([running(x) for x in t], float),
                     "kv_utilization": np.full(t.size, 0.5), "busy_fraction": np.full(t.size, 0.9), "warm": 0 * t,
                     "draining": 0 * t}}
    params = {"interval_s": 15, "step": 2, "cooldown_s": 45} if autoscaler == "reactive" else {}
    pools = {pool: PoolFacts(autoscaler, params, 20, 4, 32, list(instance_times), kv_dtype=kv_dtype,
                             batching=batching or BatchingFacts())}
    if routes and routes[0] != pool:
        pools[routes[0]] = PoolFacts("reactive", params, 8, 4, 16)
    ev = RunEvidence(cols, series, pools, {"qa": routes or [pool]}, list(scale_events), [], "fb",
                     "spill_over", 8, T_END, {"max_num_seqs": 256}, partial=partial)
    return diagnose(verdicts(cols, SLO), ev)


def test_nothing_missed_nothing_found():
    assert _run() == []


def test_a_pool_that_shrank_before_the_load_rose_is_autoscaler_lag_with_its_window_and_min_instances():
    # 20 instances, scaled down to 8 at t = 300; requests arriving in 420..480 s are slow (finish ~3 s later)
    downs = [(t, "p", 20 - 2 * k, 18 - 2 * k) for k, t in enumerate(range(240, 300, 10))]
    (f,) = _run(lambda t: 420 <= t < 480, active=lambda t: 20 if t < 300 else 8, autoscaler="reactive",
                scale_events=downs)
    assert (f["slo"], f["class"], f["pool"], f["cause"]) == ("tpot_p99", "qa", "p", "autoscaler_lag")
    a, b = f["window_s"]
    assert a <= 423 and b >= 480 and b - a <= 120   # the slow finishes (423..483 s) in 30 s bins
    e = f["evidence"]
    assert e["instances_max_before"] == 20 and e["instances_min_in_window"] == 8
    assert e["achieved_in_window"] == pytest.approx(0.1)
    assert "scenario.pools.p.min_instances=20" in f["try"]
    assert "scenario.pools.p.autoscaler.cooldown_s=15" in f["try"]
    assert any(t.startswith("search.scenario.pools.p.min_instances=range(") for t in f["try"])


def test_the_same_misses_on_a_fixed_pool_with_large_batches_are_slow_steps():
    (f,) = _run(lambda t: 420 <= t < 480, running=lambda t: 100)   # 10 running per instance
    assert f["cause"] == "step_time"
    assert "scenario.pools.p.instances=30" in f["try"]
    # max_num_seqs 256: 10 running per instance never reach 128, so halving it is a no-op and not suggested
    assert not any("max_num_seqs" in k for k in f["try"])


def test_halving_max_num_seqs_is_suggested_only_where_the_batch_reached_the_halved_limit():
    (f,) = _run(lambda t: 420 <= t < 480, running=lambda t: 100, batching=BatchingFacts(max_num_seqs=16))
    assert f["cause"] == "step_time"
    assert "batching.max_num_seqs=8" in f["try"] and "search.batching.max_num_seqs=[4,8,16]" in f["try"]
    (g,) = _run(lambda t: 420 <= t < 480, running=lambda t: 100, batching=BatchingFacts(max_num_seqs=20))
    assert not any("max_num_seqs" in k for k in g["try"])   # 10 running per instance: a limit of 10 never binds


def test_slow_decodes_with_small_batches_beside_prefills_are_prefill_interference_not_slow_steps():
    # 3 running per instance; a prompt every 5 s per instance: a fast decode (2 s) meets none, a slow one (10 s)
    # meets one or two
    spread = lambda i: i % 100
    (f,) = _run(lambda t: 420 <= t < 480, instances_of=spread)
    assert f["cause"] == "prefill_interference"
    e = f["evidence"]
    assert e["slow_beside_prefill_share"] == 1.0 and e["prefill_tokens_beside_slow_p50"] >= 1000
    assert e["tpot_p50_s_without_prefill"] == pytest.approx(0.02)
    assert f["try"] == []   # 1,000-token prompts never exceed chunked prefill's 2,048-token budget: no-op
    (g,) = _run(lambda t: 420 <= t < 480, instances_of=spread, batching=BatchingFacts(chunk_budget_tokens=512))
    assert g["try"] == ["batching=chunked_prefill", "search.batching=[continuous,chunked_prefill]"]
    (h,) = _run(lambda t: 420 <= t < 480, instances_of=spread, batching=BatchingFacts(
        chunked_prefill=True, token_budget=1000, budget_key="batching.token_budget", chunk_on=None))
    assert h["try"] == ["batching.token_budget=500", "search.batching.token_budget=[250,500,1000]"]
    (k,) = _run(lambda t: 420 <= t < 480, instances_of=spread, batching=BatchingFacts(
        chunked_prefill=True, token_budget=4096, budget_key="batching.token_budget", chunk_on=None))
    assert k["try"] == []   # 1,000-token prompts fit half of 4,096 whole: halving it splits nothing


def test_slow_decodes_that_met_no_prefill_and_small_batches_name_no_cause_and_no_knob():
    (f,) = _run(lambda t: 420 <= t < 480, instances_of=lambda i: i)   # each request alone on its instance
    assert f["evidence"]["slow_beside_prefill_share"] == 0.0
    assert (f["cause"], f["try"]) == ("undiagnosed", [])
    assert "cause: none the evidence supports" in finding_lines(f)[0] + " ".join(finding_lines(f))


def test_a_partial_run_names_no_cause_and_no_knob():
    (f,) = _run(lambda t: 420 <= t < 480, ttft_slow=True, partial=True)
    assert f["partial"] and f["cause"] is None and f["try"] == []
    assert f["evidence"]["missed_verdicts"] == ["ttft_p99 qa@p"]
    assert finding_lines(f)[0].startswith("partial run: stopped at simulated t = 600.0 s")
    assert _run(partial=True) == []   # nothing missed: nothing to say


def test_a_long_queue_makes_ttft_misses_queueing():
    # Little's law: 100 queued at 20 req/s = 5 s of waiting against a mean TTFT of about 3 s in the window
    (f,) = _run(lambda t: 300 <= t < 360, ttft_slow=True, queued=lambda t: 100 if 300 < t <= 365 else 0)
    assert (f["slo"], f["cause"]) == ("ttft_p99", "queueing")
    assert f["evidence"]["queueing_share_of_ttft"] > 0.5


def test_preempted_slow_requests_are_kv_preemption():
    (f,) = _run(lambda t: 420 <= t < 480, preempted=True)
    assert f["cause"] == "kv_preemption"
    assert f["evidence"]["preempted_share_of_slow"] == 1.0
    assert "scenario.pools.p.kv_dtype=fp8" in f["try"]
    (g,) = _run(lambda t: 420 <= t < 480, preempted=True, kv_dtype="fp8")
    assert not any("kv_dtype" in k for k in g["try"])   # already fp8: a no-op


def test_slow_requests_on_the_fallback_pool_are_the_overload_ladder():
    (f,) = _run(lambda t: 420 <= t < 480, fallback=True)
    assert f["cause"] == "overload_action"


def test_a_class_served_off_its_first_route_is_a_placement_spill():
    (f,) = _run(lambda t: 420 <= t < 480, routes=["first", "p"])
    assert f["cause"] == "placement_spill"
    assert f["try"][0] == "scenario.pools.first.min_instances=16"
    assert "scenario.placement.spill_queue_per_instance=16" in f["try"]


def test_capacity_asked_for_before_the_window_but_still_starting_is_cold_start():
    ups = [(380.0, "p", 10, 14)]
    times = [(380.0, 470.0, float("nan"))] * 4
    (f,) = _run(lambda t: 420 <= t < 480, autoscaler="reactive", scale_events=ups, instance_times=times,
                starting=lambda t: 4 if 380 < t <= 470 else 0, active=lambda t: 10 if t <= 470 else 14)
    assert f["cause"] == "cold_start"
    assert f["evidence"]["starting_at_window_start"] == 4


def test_terminal_lines_fit_80_columns_and_break_only_between_phrases():
    (f,) = _run(lambda t: 420 <= t < 480, active=lambda t: 20 if t < 300 else 8, autoscaler="reactive")
    lines = finding_lines(f)
    assert lines[0].startswith("TPOT P99 missed: qa on p")
    assert all(len(x) <= 80 for x in lines)
    phrases = ["a" * 30, "b" * 30, "c" * 30]
    assert wrap(phrases, 80, "  ") == ["  " + "a" * 30 + " · " + "b" * 30, "  " + "c" * 30]


# Real runs: code_assistant on its first 300 trace requests (a second each). Its TPOT misses come from decodes
# stalled behind whole long prompts on the same instance (continuous batching), at about 1 running per instance.
CODE = ["scenario=code_assistant", "++scenario.traffic.num_requests=300", "metrics.progress=false"]


def _simulate(*overrides, progress=None) -> dict:
    from sim.api import scenario_workload
    from sim.compose import compose_config
    from sim.config import load_run_config
    from sim.simulate import simulate

    run = load_run_config(compose_config([*CODE, *overrides]))
    return simulate(run, scenario_workload(run), progress).summary


def test_code_assistant_is_prefill_interference_and_its_knob_changes_tpot():
    s = _simulate()
    (f,) = [f for f in s["diagnosis"] if f["slo"] == "tpot_p99"]
    assert f["cause"] == "prefill_interference"
    assert f["evidence"]["running_per_instance"] < 2
    assert f["try"] == ["batching=chunked_prefill", "search.batching=[continuous,chunked_prefill]"]
    assert not any("max_num_seqs" in k for d in s["diagnosis"] for k in d["try"])   # the batch never reaches 128
    knob = _simulate(f["try"][0])
    assert knob["latency_s"]["tpot"]["p99"] < s["latency_s"]["tpot"]["p99"] - 1e-3


def test_an_interrupted_run_gets_one_partial_note_and_no_cause():
    def stop_midway(fraction):   # a signal as Ctrl-C sends it, half-way through the trace
        if 0.5 <= fraction < 1.0 and not stop_midway.sent:
            stop_midway.sent = True
            os.kill(os.getpid(), signal.SIGINT)
    stop_midway.sent = False
    s = _simulate(progress=stop_midway)
    assert s["status"] == "interrupted" and s["requests"]["arrived"] < 300
    assert [(f["cause"], f["try"], f.get("partial")) for f in s["diagnosis"]] == [(None, [], True)]
