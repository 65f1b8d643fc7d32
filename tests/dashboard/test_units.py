"""The dashboard's plain modules: discovery and validation, aggregation, KPIs, comparisons, what-if overrides."""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from dashboard import aggregate, calibration, charts, compare, data, kpis, whatif
from inferplan.errors import InputError


# ---- data --------------------------------------------------------------------------------------------------------

def test_discover_finds_runs_sweeps_and_plans_newest_first(results):
    found = data.discover([results["runs"], results["multirun"], results["base"] / "plans"])
    by_label = {f.label: f for f in found}
    assert by_label["runs/smoke/2026-11-30_12-00-00"].done is False  # half-written
    assert by_label["runs/smoke/2026-11-30_11-00-00"].done is True
    assert by_label["multirun/2026-11-30/09-00-00"].kind == "sweep"
    assert by_label["multirun/2026-11-30/09-00-00/0"].kind == "run"
    assert by_label["plans/ecommerce"].kind == "plan"
    assert "runs/calibrate/h100_sxm" not in by_label  # measurements alone do not make a run
    assert [f.label for f in found][:3] == ["runs/smoke/2026-11-30_12-00-00", "runs/smoke/2026-11-30_11-00-00",
                                            "runs/smoke/2026-11-30_10-00-00"]


def test_discover_skips_missing_roots_and_require_explains(tmp_path):
    assert data.discover([tmp_path / "nope"]) == []
    with pytest.raises(InputError, match="does not exist"):
        data.require_results_root([tmp_path / "nope"])


def test_runs_roots_reads_sidebar_then_environment_then_defaults(monkeypatch):
    monkeypatch.delenv(data.RUNS_DIR_ENV, raising=False)
    assert [str(p) for p in data.runs_roots()] == ["runs", "multirun", "plans"]
    monkeypatch.setenv(data.RUNS_DIR_ENV, "a:b")
    assert [str(p) for p in data.runs_roots()] == ["a", "b"]
    assert [str(p) for p in data.runs_roots(" x , y ,x")] == ["x", "y"]
    assert [str(p) for p in data.runs_roots(" , ")] == ["runs", "multirun", "plans"]


def test_open_run_reads_a_good_run(results):
    run = data.open_run(results["good"])
    assert run.scenario == "smoke" and set(run.schemas) == {"requests", "timeseries", "pools"}
    assert run.overrides == ("scenario=smoke", "scenario.fleet.pools.main.instances=3")
    assert "load_multiplier" in run.config_yaml


def test_an_interrupted_run_is_found_partial_and_labelled_so(results):
    found = {f.path: f for f in data.discover([results["runs"]])}
    assert found[results["partial"]].partial is True
    assert not any(f.partial for path, f in found.items() if path != results["partial"])
    run = data.open_run(results["partial"])
    assert run.partial and run.title == "smoke (partial)"
    assert data.open_run(results["good"]).title == "smoke"
    assert data.run_label("runs/smoke/x", True) == "runs/smoke/x (partial)"


def test_a_summary_rewritten_as_interrupted_is_noticed(factory, tmp_path):
    run = tmp_path / "runs" / "smoke" / "r"
    factory.make_run(run, n=200)
    assert not data.discover([tmp_path / "runs"])[0].partial
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "status": "interrupted"}))
    os.utime(run / "summary.json", ns=(1, 1))  # a different modification time, whatever the clock's resolution
    assert data.discover([tmp_path / "runs"])[0].partial


@pytest.mark.parametrize("damage, message", [
    (lambda p: (p / "DONE").unlink(), "half-written run: no DONE marker"),
    (lambda p: (p / "summary.json").write_text('{"scenario": '), "not valid JSON (JSONDecodeError)"),
    (lambda p: (p / "summary.json").write_text("[1, 2]"), "holds a list, expected a JSON object"),
    (lambda p: (p / "summary.json").unlink(), "file missing"),
    (lambda p: (p / "requests.parquet").write_bytes(b"garbage"), "not a readable Parquet file"),
    (lambda p: pd.DataFrame({"t_s": [1.0]}).to_parquet(p / "timeseries.parquet"),
     "arrivals, completions, queued, running, instances, kv_utilization: column missing"),
])
def test_open_run_explains_each_kind_of_damage(factory, tmp_path, damage, message):
    run = tmp_path / "run"
    factory.make_run(run, n=200)
    damage(run)
    with pytest.raises(InputError) as info:
        data.open_run(run)
    assert message in str(info.value)
    assert data.explain(info.value).count("\n") == 0


def test_read_table_reads_only_the_asked_columns(results):
    df = data.read_table(results["good"], "requests", ["ttft_s", "status", "not_a_column"])
    assert list(df.columns) == ["ttft_s", "status"] and len(df) == 2000


# ---- aggregate ---------------------------------------------------------------------------------------------------

def day_of_seconds() -> pd.DataFrame:
    t = np.arange(1.0, 86_401.0)
    return pd.DataFrame({"t_s": t, "arrivals": np.full(len(t), 5), "completions": np.full(len(t), 4),
                         "instances": np.where(t < 43_200, 2.0, 4.0), "queued": np.zeros(len(t)),
                         "kv_utilization": np.full(len(t), 0.5)})


def test_downsample_caps_points_and_keeps_totals():
    ts = day_of_seconds()
    small = aggregate.downsample(ts, {"arrivals": "sum", "instances": "mean"})
    assert len(small) <= aggregate.MAX_POINTS
    assert small["arrivals"].sum() == ts["arrivals"].sum()
    assert small["t_s"].max() == 86_400.0
    # gauges are averaged: only the bucket straddling the step from 2 to 4 instances holds a value in between
    assert small["instances"].between(2.0, 4.0).all() and (~small["instances"].isin([2.0, 4.0])).sum() <= 1
    assert aggregate.downsample(ts.head(100), {"arrivals": "sum"}).equals(ts.head(100)[["t_s", "arrivals"]])


def test_arrival_rate_is_per_second_after_downsampling():
    long = aggregate.arrivals_and_capacity(day_of_seconds())
    rates = long[long["series"] == "Arrivals (req/s)"]["value"]
    assert len(rates) <= aggregate.MAX_POINTS and np.allclose(rates, 5.0)


def test_pool_states_downsample_per_pool():
    t = np.arange(1.0, 5001.0)
    pools = pd.concat([pd.DataFrame({"t_s": t, "pool": p, "starting": 0.0, "active": n, "draining": 0.0})
                       for p, n in (("a", 2.0), ("b", 3.0))])
    long = aggregate.pool_states(pools)
    assert long.groupby("pool", observed=True).size().max() <= 3 * aggregate.MAX_POINTS
    active = long[long["state"] == "active"].groupby("pool")["instances"].unique()
    assert list(active["a"]) == [2.0] and list(active["b"]) == [3.0]


def test_latency_percentiles_per_bucket():
    req = pd.DataFrame({"first_token_s": np.r_[np.linspace(0.1, 9.9, 101), np.linspace(10.1, 19.9, 101)],
                        "ttft_s": np.r_[np.arange(101.0), 1000 + np.arange(101.0)],
                        "finish_s": np.nan, "tpot_s": np.nan})
    long = aggregate.latency_over_time(req, bucket_s=10.0)
    got = long.set_index(["t_s", "percentile"])["value_s"]
    assert got[(10.0, "P50")] == 50.0 and got[(10.0, "P99")] == 99.0 and got[(20.0, "P90")] == 1090.0
    assert set(long["metric"]) == {"TTFT"}  # no TPOT: every tpot is NaN


def test_nice_bucket():
    assert aggregate.nice_bucket_s(600) == 5.0
    assert aggregate.nice_bucket_s(86_400) == 600.0
    assert aggregate.nice_bucket_s(10, min_s=2.0) == 2.0


def test_pareto_front_and_cheapest_meeting_slo():
    df = pd.DataFrame({"cost": [1, 2, 3, 4, 2.5], "lat": [5, 3, 4, 1, 3], "ok": [False, True, True, True, None]})
    assert list(aggregate.pareto_front(df, "cost", "lat")) == [True, True, False, True, False]
    assert aggregate.cheapest_meeting_slo(df, "cost", "ok") == 1
    assert aggregate.cheapest_meeting_slo(df.assign(ok=False), "cost", "ok") is None


def test_not_served_lists_reasons_and_unfinished():
    s = {"requests": {"rejected_by_reason": {"queue_full": 3, "too_long": 0}, "unfinished": 2}}
    assert aggregate.not_served(s).to_dict("records") == [{"reason": "queue full", "requests": 3},
                                                          {"reason": "unfinished at window end", "requests": 2}]


# ---- kpis --------------------------------------------------------------------------------------------------------

def test_flatten_summary_uses_sweep_names(results):
    s = json.loads((results["good"] / "summary.json").read_text())
    flat = kpis.flatten_summary(s)
    assert flat["ttft_p99_s"] == s["latency_s"]["ttft"]["p99"] and flat["usd"] == s["cost"]["usd"]
    assert flat["slo_ttft_p99_s"] == 2.0 and flat["slo_met"] is True and flat["slo_met_tpot_p99"] is True
    assert set(flat) - compare.METRICS == {"slo_met_ttft_p99", "slo_met_tpot_p99", "slo_met_served_fraction"}


def test_kpi_verdicts_come_from_the_summary_or_are_recomputed():
    s = {"latency_s": {"ttft": {"p99": 2.5}, "tpot": {"p99": 0.05}},
         "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.1}}
    by_key = {k.key: k for k in kpis.kpis(s)}
    assert by_key["ttft_p99_s"].met is False and by_key["tpot_p99_s"].met is True
    assert by_key["tpot_p99_s"].show() == "50.0 ms" and by_key["tpot_p99_s"].show_target() == "≤ 100.0 ms"
    assert kpis.overall_verdict(s) is False
    s["slo"]["met"] = {"ttft_p99": True, "tpot_p99": True}
    assert kpis.overall_verdict(s) is True  # the simulator's verdict wins
    assert kpis.overall_verdict({}) is None


# ---- compare -----------------------------------------------------------------------------------------------------

def test_sweep_frame_fills_verdicts_from_jobs_and_labels_by_varying_overrides(results):
    df, notes = compare.sweep_frame(results["sweep"])
    assert not notes
    assert list(df["label"]) == [f"scenario.fleet.pools.main.instances={n}" for n in (1, 2, 3, 4)]
    assert list(df["slo_met"]) == [False, True, True, True]
    assert compare.override_columns(df.drop(columns="label")) == ["scenario.fleet.pools.main.instances",
                                                                  "batching"]
    ann = compare.annotate(df, "usd_per_million_output_tokens", "ttft_p99_s")
    assert list(ann["cheapest"]) == [False, True, False, False]


def test_sweep_frame_marks_a_partial_job_by_its_summary_or_by_the_sweep_status(factory, tmp_path):
    factory.make_sweep(tmp_path / "sweep", counts=(1, 2, 3))
    job = tmp_path / "sweep" / "1" / "summary.json"
    job.write_text(json.dumps({**json.loads(job.read_text()), "status": "interrupted"}))
    df, _ = compare.sweep_frame(tmp_path / "sweep")
    assert list(df["label"]) == ["scenario.fleet.pools.main.instances=1",
                                 "scenario.fleet.pools.main.instances=2 (partial)",
                                 "scenario.fleet.pools.main.instances=3"]
    pd.DataFrame({"instances": [1, 2], "status": ["completed", "interrupted"], "usd": [1.0, 2.0]}).to_parquet(
        tmp_path / "sweep.parquet")  # no run_dir: only the sweep's own status column
    df, _ = compare.sweep_frame(tmp_path)
    assert list(df["label"]) == ["instances=1", "instances=2 (partial)"]


def test_runs_frame_marks_a_partial_run(results):
    df, notes = compare.runs_frame([results["good"], results["partial"]], ["good", "stopped"])
    assert not notes and list(df["label"]) == ["good", "stopped (partial)"]


def test_pareto_point_names_keep_the_partial_mark_when_cut():
    assert charts.short_label("runs/smoke/2026-11-30_08-30-00 (partial)") == "runs/smoke/2026-11-30… (partial)"
    assert charts.short_label("x" * 40) == "x" * 31 + "…"
    assert charts.short_label("short (partial)") == "short (partial)"


def test_sweep_frame_without_run_dirs_judges_from_targets(tmp_path):
    pd.DataFrame({"instances": [1, 2], "ttft_p99_s": [3.0, 1.0], "slo_ttft_p99_s": [2.0, 2.0],
                  "usd": [1.0, 2.0]}).to_parquet(tmp_path / "sweep.parquet")
    df, _ = compare.sweep_frame(tmp_path)
    assert list(df["slo_met"]) == [False, True] and list(df["label"]) == ["instances=1", "instances=2"]


def test_empty_or_corrupt_sweep_is_explained(tmp_path):
    pd.DataFrame({"usd": []}).to_parquet(tmp_path / "sweep.parquet")
    with pytest.raises(InputError, match="the sweep has no jobs"):
        compare.sweep_frame(tmp_path)
    (tmp_path / "sweep.parquet").write_bytes(b"nope")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        compare.sweep_frame(tmp_path)


# ---- what-if -----------------------------------------------------------------------------------------------------

SMOKE_LIKE = {"scenario": {"traffic": {"kind": "poisson", "rate_per_s": 8.0},
                           "pools": {"main": {"hardware": "h100_sxm", "instances": 2},
                                     "prefill": {"hardware": "h100_sxm", "instances": 1}}}}


def test_whatif_finds_knobs_in_the_resolved_config():
    assert whatif.find_load_key(SMOKE_LIKE) == ("scenario.traffic.rate_per_s", 8.0)
    with_multiplier = {"scenario": {**SMOKE_LIKE["scenario"], "load_multiplier": 1.0}}
    assert whatif.find_load_key(with_multiplier) == ("scenario.load_multiplier", 1.0)
    two_rates = {"classes": [{"rate_per_s": 1.0}, {"rate_per_s": 2.0}]}
    assert whatif.find_load_key(two_rates) is None
    assert whatif.find_pool_keys(SMOKE_LIKE, ["main", "prefill"]) == {
        "main": ("scenario.pools.main.instances", 2), "prefill": ("scenario.pools.prefill.instances", 1)}
    listed = {"fleet": [{"name": "main", "num_instances": 4}]}
    assert whatif.find_pool_keys(listed, ["main"]) == {"main": ("fleet.0.num_instances", 4)}


def test_whatif_overrides_merge_later_wins_and_drop_scenario_and_hydra():
    merged = whatif.build_overrides(["scenario=smoke", "seed=3", "router=round_robin", "hydra.run.dir=x"],
                                    {"router": "least_outstanding"}, ["seed=4", "+extra.key=1"])
    assert merged == ["router=least_outstanding", "seed=4", "+extra.key=1"]
    assert whatif.parse_extra("a=1\n# comment\n\nnot one\n=2") == (["a=1"], ["not one", "=2"])


def test_whatif_runner_missing_is_explained(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "sim.api", None)
    runner, why = whatif.load_runner()
    assert runner is None and "sim.api" in why


def test_policy_choices_are_the_conf_group_files(results):
    assert whatif.policy_choices("router", results["base"] / "conf") == ["least_outstanding", "round_robin"]
    assert whatif.policy_choices("autoscaler", results["base"] / "conf") == []


# ---- calibration -------------------------------------------------------------------------------------------------

def test_error_table_uses_held_out_points():
    rows = pd.DataFrame({"op": "gemm", "dtype": "bf16", "measured_s": [1.0, 1.0, 1.0, 1.0],
                         "predicted_s": [1.0, 1.0, 1.1, 0.8], "held_out": [False, False, True, True]})
    t = calibration.error_table(rows).iloc[0]
    assert t["evaluated on"] == "held-out" and t["held out"] == 2 and t["points"] == 4
    assert t["median |error| (%)"] == pytest.approx(15.0) and t["mean signed error (%)"] == pytest.approx(-5.0)
    t_all = calibration.error_table(rows.assign(held_out=False)).iloc[0]
    assert t_all["evaluated on"] == "all (none held out)"


def test_roofline_lines_bend_at_the_ridge_point():
    lines = calibration.roofline_lines({"bf16": 1e15}, 1e12, 1.0, 10_000.0)
    low, high = lines.iloc[0], lines.iloc[-1]
    assert low["tflops"] == pytest.approx(low["intensity"] * 1e12 / 1e12)  # memory-bound: intensity x bandwidth
    assert high["tflops"] == pytest.approx(1000.0)  # compute-bound: the peak
    assert calibration.roofline_lines({}, None, 1, 10).empty


def test_profile_loader_reads_provenance(results):
    loaded = calibration.load_profile(results["profile"])
    assert loaded.notes == () and loaded.provenance["hardware"] == "h100_sxm"
    assert calibration.peaks_of(loaded.provenance)[1] == 3.35e12


def test_peaks_come_from_the_profile_else_from_fit_json(results):
    fit = json.loads((results["calibration"] / "fit.json").read_text())  # calibrate's {used, datasheet, measured}
    flops, bandwidth = calibration.peaks_of(None, fit)
    assert flops == {"bf16": 989.4e12, "fp8": 1978.9e12} and bandwidth == 3.35e12
    assert calibration.peaks_of({}, None) == ({}, None)


def test_charts_use_only_points_on_the_profile(results):
    rows = calibration.load_measurements(results["calibration"]).rows
    kept = calibration.on_profile(rows)
    assert len(rows) == 48 and len(kept) == 36 and set(kept["impl"]) == {
        "kernels.gemm", "kernels.gemm_fp8_block", "kernels.attn_paged_decode"}
    assert calibration.on_profile(rows.drop(columns=["in_profile", "primary"])).equals(
        rows.drop(columns=["in_profile", "primary"]))


# ---- charts ------------------------------------------------------------------------------------------------------

def test_chart_axes_carry_units(results):
    from dashboard import figures
    run = data.open_run(results["good"])
    specs = json.dumps([fig.chart.to_dict() for fig in figures.run_charts(run, figures.run_frames(run))
                        if fig.chart is not None])
    for title in ("Requests per second (req/s)", "TTFT (s)", "TPOT (ms)", "Percent of fleet capacity (%)",
                  "Instance time in iterations (s)", "Cost (USD)", "Simulated time (min)"):
        assert title in specs
    assert charts.MAX_SCATTER_POINTS < 5000  # Altair's inline-data limit


def test_whatif_finds_autoscaler_limits_only_for_autoscaled_pools():
    from dashboard import whatif

    config = {"scenario": {"pools": {
        "l40s": {"instances": 32, "min_instances": 4, "max_instances": 32, "autoscaler": {"name": "reactive"}},
        "cpu": {"instances": 4, "min_instances": 4, "max_instances": 4}}}}
    assert whatif.find_limit_keys(config, ["l40s", "cpu"]) == {
        "l40s": {"min_instances": ("scenario.pools.l40s.min_instances", 4),
                 "max_instances": ("scenario.pools.l40s.max_instances", 32)}}


def test_a_partial_run_is_never_the_cheapest_meeting_the_slo():
    import pandas as pd
    from dashboard.compare import annotate
    df = pd.DataFrame({"label": ["a", "b (partial)"], "partial": [False, True], "total_usd": [10.0, 2.0],
                       "ttft_p99_s": [1.0, 0.5], "slo_met": [True, True]})
    out = annotate(df, "total_usd", "ttft_p99_s")
    assert out["cheapest"].tolist() == [True, False]
