"""The day plan (sim/plan/day): windows simulated in parallel, each with its warm-up, agree with one continuous
run over the same span; the capacity arithmetic is the lower bound it claims; the options and the scenario's day
window behave as documented; no published outcome figure is an input."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from inferplan.errors import InputError
from sim.api import run_composed
from sim.compose import compose_config
from sim.config import load_run_config
from sim.plan.day.capacity import decode_batch, unit_capacity, units_needed, _pools
from sim.plan.day.options import DayOptions, parse_day_args
from sim.plan.day.planner import plan_day
from sim.plan.day.traffic import day_curve, request_stats
from sim.plan.day.verify import Span, measure

REPO = Path(__file__).resolve().parents[2]
# A light day (2 conversations/s on average, one unit of each kind) in windows of 120 s from the day's start.
LIGHT = ("scenario=deepseek_v3_day", "scenario.traffic.session_arrivals.mean_rate_per_s=2")
SMALL = dict(window_s=120.0, warmup_s=240.0, measure_s=120.0, drain_s=30.0, sample_s=2400.0)


@pytest.fixture(scope="module")
def traffic_and_run():
    cfg = compose_config([*LIGHT, "metrics.progress=false"])
    return OmegaConf.to_container(cfg.scenario.traffic, resolve=True), load_run_config(cfg)


@pytest.fixture(scope="module")
def stats(traffic_and_run):
    traffic, run = traffic_and_run
    return request_stats(traffic, run.seed, 2400.0)


def _plan(tmp_path, name: str, **opts):
    options = DayOptions(max_rounds=1, out_dir=str(tmp_path / name), **{**SMALL, **opts})
    doc, path = plan_day(options, LIGHT, "test")
    return doc, path, [w for w in doc["windows"] if w["rounds"]]


def _figures(w: dict) -> dict:
    return {k: v for k, v in w["measured"].items()}


def test_windows_in_parallel_equal_one_sequential_run(tmp_path):
    """Windows 1 and 2 run at once in two worker processes give exactly the figures of the same windows run one
    after the other in this process (tolerance: none; each window's run depends only on its config)."""
    par_doc, par_path, par = _plan(tmp_path, "parallel", verify="1:3", jobs=2, warmup_s=120.0, measure_s=60.0)
    seq_doc, _, seq = _plan(tmp_path, "sequential", verify="1:3", jobs=1, warmup_s=120.0, measure_s=60.0)
    assert (par_doc["executor"]["backend"], seq_doc["executor"]["backend"]) == ("processes", "inline")
    assert [w["index"] for w in par] == [w["index"] for w in seq] == [1, 2]
    assert all((w["prefill_units"], w["decode_units"]) == (1, 1) for w in par)
    assert [_figures(w) for w in par] == [_figures(w) for w in seq]
    assert all(w["measured"]["requests"] > 100 and w["measured"]["cache_hit_share"] > 0.2 for w in par)
    assert par_doc["day"] == seq_doc["day"]
    lines = (tmp_path / "parallel" / "windows.jsonl").read_text().splitlines()
    assert len(lines) == 2                        # streamed: one line per finished window run


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed: pip install -e '.[ray]'")
@pytest.mark.slow  # starts a local Ray
def test_windows_on_ray_equal_the_local_run(tmp_path):
    """Windows 1 and 2 as Ray tasks on a local Ray (2 workers) give exactly the figures of the same windows run
    in this process, and their run folders come back."""
    ray_doc, _, on_ray = _plan(tmp_path, "ray", verify="1:3", jobs=2, warmup_s=120.0, measure_s=60.0,
                               ray_address="local")
    loc_doc, _, local = _plan(tmp_path, "local", verify="1:3", jobs=1, warmup_s=120.0, measure_s=60.0)
    assert ray_doc["executor"]["backend"] == "ray" and ray_doc["executor"]["workers"] == 2
    assert [w["index"] for w in on_ray] == [w["index"] for w in local] == [1, 2]
    assert [_figures(w) for w in on_ray] == [_figures(w) for w in local]
    assert ray_doc["day"] == loc_doc["day"]
    for w in on_ray:
        assert (Path(w["rounds"][-1]["run_dir"]) / "requests.parquet").is_file()


@pytest.mark.slow  # ~1 min on 2 cores
def test_windows_agree_with_one_continuous_run(tmp_path):
    """Windows 2 and 3 (each its own run: 240 s of warm-up, 120 s measured) against one run over [0, 480 s)
    measured over the same spans. The runs draw different arrivals, so they agree statistically; over the two
    windows (~1,000 requests): request count within 20%, cache-hit share within 8 points (a share over a few
    hundred conversations: measured 0.447 and 0.504 for the same span from two draws), P99 TPOT within 15%."""
    _, _, windows = _plan(tmp_path, "plan", verify="2:4", jobs=2)
    sa = "scenario.traffic.session_arrivals"
    cfg = compose_config([*LIGHT, f"{sa}.window_start_s=0", f"{sa}.window_s=480", "scenario.drain_timeout_s=30",
                          "scenario.pools.prefill.instances=1", "scenario.pools.decode.instances=1",
                          "metrics.progress=false"])
    run_composed(cfg, tmp_path / "continuous", progress=lambda f: None)
    slo = {"ttft_p99_s": 5.0, "tpot_p99_s": 0.05, "served_fraction": 0.9999}
    seq = [measure(tmp_path / "continuous", Span(w["index"], w["start_s"], 0.0, 480.0, w["start_s"], 120.0), slo)
           for w in windows]
    par = [w["measured"] for w in windows]
    n_par, n_seq = sum(p["requests"] for p in par), sum(s.requests for s in seq)
    assert n_par > 600 and n_par == pytest.approx(n_seq, rel=0.20)
    hits = lambda ms, n: sum(m * r for m, r in ms) / n  # noqa: E731
    assert hits([(p["cache_hit_share"], p["requests"]) for p in par], n_par) == pytest.approx(
        hits([(s.cache_hit_share, s.requests) for s in seq], n_seq), abs=0.08)
    for p, s in zip(par, seq):
        assert p["tpot_p99_s"] == pytest.approx(s.tpot_p99_s, rel=0.15)


def test_arithmetic_units_are_the_fewest_that_carry_the_mean_demand(traffic_and_run, stats):
    _, run = traffic_and_run
    cap = unit_capacity(run, stats)
    for rate in (50.0, 700.0, 1916.0, 5000.0):
        p, d = units_needed(cap, stats, rate)
        new, out = rate * (stats.prompt_tokens - stats.cached_tokens), rate * stats.output_tokens
        assert p * cap.prefill_new_tokens_per_s >= new > (p - 1) * cap.prefill_new_tokens_per_s or p == 1
        assert d * cap.decode_output_tokens_per_s >= out > (d - 1) * cap.decode_output_tokens_per_s or d == 1


def test_decode_batch_is_the_largest_within_the_tpot_target(traffic_and_run, stats):
    _, run = traffic_and_run
    _, decode = _pools(run)
    ctx = stats.kv_tokens_per_output_token
    for target in (0.02, 0.03):  # below the max_num_seqs batch's TPOT: the TPOT bound decides
        b, step, limit = decode_batch(run, decode, ctx, target)
        assert limit == "tpot" and step / decode.tokens_per_step <= target
        _, step_up, _ = decode_batch(run, decode, ctx, 10.0)
        from sim.core.pricing import BatchShape
        more = decode.step_s(BatchShape(decode_seqs=b + 1, decode_ctx_sum=int((b + 1) * ctx), sampled_seqs=b + 1))
        assert more / decode.tokens_per_step > target
    with pytest.raises(InputError, match="raise the TPOT target"):
        decode_batch(run, decode, ctx, 1e-4)


def test_day_curve_level_is_the_days_and_a_window_is_its_slice(traffic_and_run):
    """`mean_rate_per_s` sets the day's level; `window_start_s/window_s` keep that level (not the window's)."""
    traffic, _ = traffic_and_run
    curve = day_curve(traffic)
    assert curve.window_mean_per_s(0.0, 86400.0) == pytest.approx(2.0, rel=1e-9)
    from scenarios.arrivals.daily import daily_from_config
    from scenarios.config_reader import ConfigReader
    sa = dict(traffic["session_arrivals"], window_start_s=43200.0, window_s=600.0)
    proc = daily_from_config(ConfigReader(sa))
    assert proc.duration_s == 600.0
    assert proc.mean_rate_per_s == pytest.approx(curve.window_mean_per_s(43200.0, 600.0), rel=1e-3)
    times = proc.sample(np.random.default_rng(0))
    assert times.min() >= 0 and times.max() < 600.0
    with pytest.raises(InputError, match="give both window_start_s and window_s"):
        daily_from_config(ConfigReader({k: v for k, v in sa.items() if k != "window_s"}))
    with pytest.raises(InputError, match="after duration_s"):
        daily_from_config(ConfigReader(dict(sa, window_start_s=86000.0)))


def test_options():
    opts, overrides = parse_day_args(["scenario=deepseek_v3_day", "mode=day", "verify=1:3", "window_s=3600"])
    assert overrides == ("scenario=deepseek_v3_day",) and opts.selected(24) == [1, 2] and opts.window_s == 3600
    assert DayOptions(verify="5").selected(144) == [5] and DayOptions(verify="none").selected(144) == []
    with pytest.raises(InputError, match="verify"):
        DayOptions(verify="later")
    with pytest.raises(InputError, match="measure_s"):
        DayOptions(window_s=600, measure_s=900)
    with pytest.raises(InputError, match="search"):
        parse_day_args(["mode=day", "search.scenario.pools.prefill.instances=range(1,4)"])


# Published outcomes of DeepSeek's day: only sim/plan/day/published.py and docs/validation.md may hold them.
OUTCOMES = [r"73[.,]7", r"14[.,]8\s*k", r"14[.,]8e3", r"226[.,]75", r"\b278\b", r"87[,.]?072", r"23[.,]9\b",
            r"7[.,]30?\b units", r"\b264\b"]


def test_no_published_outcome_is_an_input():
    files = [REPO / "conf/scenario/deepseek_v3_day.yaml", *sorted((REPO / "sim/plan/day").glob("*.py"))]
    for f in files:
        if f.name == "published.py":
            continue
        text = f.read_text()
        for pattern in OUTCOMES:
            assert not re.search(pattern, text), f"{f.relative_to(REPO)} holds {pattern}"


def test_a_window_too_large_for_one_worker_is_a_slice_of_its_fleet():
    from sim.plan.day.verify import Slice, fleet_slice, next_slice
    assert fleet_slice(9, 4, 4e5, 5e5) == Slice(1.0, 9, 4)
    sl = fleet_slice(37, 13, 3.4e6, 5e5)          # 13 * 5e5 / 3.4e6 = 1.9 -> 1 decode unit
    assert (sl.decode_units, sl.fraction) == (1, 1 / 13) and sl.prefill_units == 3   # ceil(37 / 13)
    assert sl.fleet_units() == (39, 13)           # what the slice stands for (prefill rounded up: >= the share)
    from sim.plan.day.verify import WindowMeasure
    miss = WindowMeasure(10, 10, 0, 0, 9.0, 0.01, 1.0, 0.5, {"ttft_p99": False, "tpot_p99": True,
                                                            "served_fraction": True})
    assert next_slice(sl, miss).fleet_units() == (52, 13)


def test_warm_hit_share_counts_only_conversations_begun_since_the_start():
    """Three requests: a first turn (0 s, 100 new tokens), its second turn 100 s later (50 new + 100 hit) and its
    third 400 s later (50 new + 250 hit). 120 s after a run starts only the first two exist: 100 / 250 = 40%;
    after 400 s all three: 350 / 550. Warm-up for 2/3 of the requests: 100 s, in whole minutes 120 s."""
    from sim.plan.day.traffic import RequestStats
    st = RequestStats(1.0, 0.0, 0.0, 0.0, 0.0, 3, new_tokens=np.array([100, 50, 50]),
                      hit_tokens=np.array([0, 100, 250]), since_first_turn_s=np.array([0.0, 100.0, 400.0]))
    assert st.warm_hit_share(0.0) == 0.0
    assert st.warm_hit_share(120.0) == pytest.approx(100 / 250)
    assert st.warm_hit_share(400.0) == pytest.approx(350 / 550)
    assert st.warmup_s(0.5) == 120.0      # the median request comes 100 s into its conversation
    assert st.warmup_s(1.0) == 420.0


def test_the_default_warm_up_holds_99_percent_of_the_requests(stats):
    w = stats.warmup_s(0.99)
    assert np.mean(stats.since_first_turn_s <= w) >= 0.99
    assert w >= 300.0 and stats.warm_hit_share(w) > stats.warm_hit_share(300.0)
    assert DayOptions().warmup_s is None


def test_a_day_plan_with_nothing_simulated_says_so_first(tmp_path):
    # verify=none prices the capacity rule only: its first line may not read as a pass
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "sim.plan", "scenario=deepseek_v3_day", "mode=day", "verify=none",
                           f"out_dir={tmp_path / 'day'}"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[0].startswith("UNVERIFIED: no window simulated (verify=none)")
