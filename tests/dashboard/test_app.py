"""Every page of the app, driven by Streamlit's AppTest on fixture folders, good and broken."""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import data

APP = Path(__file__).resolve().parents[2] / "dashboard" / "streamlit_app.py"
PAGES = {"run": None, "compare": "views/compare_page.py", "calibration": "views/calibration_page.py",
         "whatif": "views/whatif_page.py"}


def open_page(page: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    if PAGES[page]:
        at.switch_page(PAGES[page]).run()
    return at


def texts(at: AppTest, kind: str) -> list[str]:
    return [str(e.value) for e in getattr(at, kind)]


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def choose(widget, label_part: str):
    """Select the option whose shown label contains `label_part`."""
    index = next(i for i, o in enumerate(widget.options) if label_part in o)
    return widget.select_index(index)


def summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


# ---- Run ---------------------------------------------------------------------------------------------------------

def test_run_page_defaults_to_newest_complete_run_and_shows_kpis_and_charts(results, app_env):
    app_env(results)
    at = open_page("run")
    no_exception(at)
    assert at.selectbox(key="run_pick").value.path == results["good"]  # the half-written newer run is not default
    metrics = {m.label.split(" :")[0]: m for m in at.metric}
    s = summary(results["good"])
    assert metrics["TTFT P99"].value == f"{s['latency_s']['ttft']['p99']:,.3f} s"
    assert metrics["TPOT P99"].value == f"{s['latency_s']['tpot']['p99'] * 1e3:,.1f} ms"
    assert metrics["TTFT P99"].label.endswith(":green[:material/check_circle:]")  # the verdict
    assert metrics["TTFT P50"].label == "TTFT P50"  # no SLO on P50, no verdict
    assert metrics["Cost per 1M output tokens"].value == f"{s['cost']['usd_per_million_output_tokens']:,.2f} USD"
    assert texts(at, "success") == ["Every SLO is met."]
    assert texts(at, "subheader")[:3] == ["Diagnosis", "Verdicts by class", "Verdicts by class and pool"]
    assert "Nothing to diagnose: every SLO verdict is met or has no data." in texts(at, "caption")
    assert texts(at, "subheader")[3:11] == ["Arrival rate against capacity", "Instances per pool by state",
                                          "Queue length", "KV-cache utilisation and busy fraction",
                                          "Latency over time", "Where the time goes", "Cost by pool",
                                          "Requests not served, by reason"]
    assert len(at.get("vega_lite_chart")) == 8
    assert not at.error and not at.warning


def test_run_page_explains_a_half_written_run(results, app_env):
    app_env(results)
    at = open_page("run")
    choose(at.selectbox(key="run_pick"), "(incomplete)").run()
    no_exception(at)
    [error] = texts(at, "error")
    assert "half-written run: no DONE marker" in error and "re-run it" in error
    assert not at.metric


def test_run_page_marks_a_partial_run_and_names_no_cause(results, app_env):
    app_env(results)
    at = open_page("run")
    picker = at.selectbox(key="run_pick")
    assert "runs/smoke/2026-11-30_08-30-00 (partial)" in picker.options
    assert "runs/smoke/2026-11-30_11-00-00" in picker.options  # a complete run is not marked
    choose(picker, "(partial)").run()
    no_exception(at)
    assert at.selectbox(key="run_pick").value.path == results["partial"]
    s = summary(results["partial"])
    assert s["diagnosis"]  # the summary holds causes and knobs the page must not present
    [banner] = texts(at, "warning")
    assert banner == (f"Partial run: interrupted at simulated t = {s['simulated_duration_s']:,.1f} s; "
                      f"{s['requests']['unfinished']:,} requests unfinished; latencies and costs cover only what was "
                      "simulated.")
    assert any(c.startswith("Partial run: no cause is named") for c in texts(at, "caption"))
    shown = " ".join(texts(at, "markdown") + texts(at, "code"))
    assert "cause:" not in shown and "Try:" not in shown
    assert not any(knob in shown for f in s["diagnosis"] for knob in f["try"])
    assert at.metric  # the figures of what was simulated are still shown


def test_run_page_shows_a_complete_runs_diagnosis_without_a_partial_banner(results, app_env):
    app_env(results)
    at = open_page("run")
    choose(at.selectbox(key="run_pick"), "2026-11-30_08-00-00").run()
    no_exception(at)
    assert not at.warning
    assert any("cause: queueing" in m for m in texts(at, "markdown"))


def test_run_page_explains_a_corrupt_parquet(results, app_env):
    app_env(results)
    at = open_page("run")
    choose(at.selectbox(key="run_pick"), "2026-11-30_09-00-00").run()
    no_exception(at)
    [error] = texts(at, "error")
    assert "timeseries.parquet" in error and "not a readable Parquet file" in error
    assert "Traceback" not in error


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_explains_an_empty_results_folder(results, app_env, page, monkeypatch):
    app_env(results, roots=str(results["empty"]))
    monkeypatch.chdir(results["empty"])  # no calibrate/profiles either
    at = open_page(page)
    no_exception(at)
    shown = " ".join(texts(at, "info") + texts(at, "warning"))
    assert "No runs in" in shown or "No profile" in shown


@pytest.mark.parametrize("page", ["run", "compare", "whatif"])
def test_every_page_explains_a_missing_results_folder(results, app_env, page, tmp_path):
    app_env(results, roots=str(tmp_path / "nowhere"))
    at = open_page(page)
    no_exception(at)
    assert any("does not exist" in e for e in texts(at, "error"))


# ---- Compare -----------------------------------------------------------------------------------------------------

def test_compare_runs_highlights_the_cheapest_run_meeting_the_slo(results, app_env):
    app_env(results)
    at = open_page("compare")
    no_exception(at)
    chosen = at.multiselect(key="compare_runs").value
    assert results["corrupt"] in [f.path for f in chosen]  # complete (DONE) but unreadable: reported, not fatal
    assert any("not a readable Parquet file" in w for w in texts(at, "warning"))
    readable = [f.path for f in chosen if f.path != results["corrupt"]]
    met = [p for p in readable if all(summary(p)["slo"]["met"].values())]
    cheapest = min(met, key=lambda p: summary(p)["cost"]["usd_per_million_output_tokens"])
    [success] = texts(at, "success")
    assert "Cheapest configuration meeting the SLO" in success and cheapest.name in success
    assert len(at.dataframe[0].value) == len(readable)
    assert len(at.get("vega_lite_chart")) == 2  # Pareto and the side-by-side bars
    assert any(f"{len(chosen)} runs, all priced the same way. Cost model: analytical. No number here was measured"
               in c for c in texts(at, "caption")), texts(at, "caption")  # (the corrupt run's summary reads)


def test_compare_leaves_a_partial_run_out_by_default_and_marks_it_when_picked(results, app_env):
    app_env(results)
    at = open_page("compare")
    runs = at.multiselect(key="compare_runs")
    # the four newest complete runs, though the partial one is newer than the last of them
    assert [f.path for f in runs.value] == [results[k] for k in ("good", "good2", "corrupt", "missed")]
    assert "runs/smoke/2026-11-30_08-30-00 (partial)" in runs.options
    partial = next(f for f in data.discover([results["runs"]]) if f.path == results["partial"])
    good = next(f for f in runs.value if f.path == results["good"])
    runs.set_value([good, partial]).run()
    no_exception(at)
    table = at.dataframe[0].value
    assert list(table["configuration"]) == ["runs/smoke/2026-11-30_11-00-00",
                                            "runs/smoke/2026-11-30_08-30-00 (partial)"]


def test_compare_sweep_reads_verdicts_from_the_jobs(results, app_env):
    app_env(results)
    at = open_page("compare")
    at.radio(key="compare_mode").set_value("Sweep or plan").run()
    choose(at.selectbox(key="compare_sweep"), "multirun/2026-11-30/09-00-00").run()
    no_exception(at)
    table = at.dataframe[0].value
    assert list(table["configuration"]) == [f"scenario.fleet.pools.main.instances={n}" for n in (1, 2, 3, 4)]
    verdicts = [all(summary(results["sweep"] / str(i))["slo"]["met"].values()) for i in range(4)]
    assert verdicts == [False, True, True, True]  # the fixture's 1-instance job misses; the test needs both kinds
    assert list(table["meets SLO"]) == ["no", "yes", "yes", "yes"]
    assert "scenario.fleet.pools.main.instances=2" in texts(at, "success")[0]
    assert any("4 runs, all priced the same way. Cost model: analytical." in c for c in texts(at, "caption"))


def test_compare_plan_shows_the_plan_and_its_configurations(results, app_env):
    app_env(results)
    at = open_page("compare")
    at.radio(key="compare_mode").set_value("Sweep or plan").run()
    choose(at.selectbox(key="compare_sweep"), "plans").run()
    no_exception(at)
    plan = at.dataframe[0].value
    assert "chosen.scenario.fleet.pools.main.instances" in list(plan["field"])
    assert "scenario.fleet.pools.main.instances=2" in texts(at, "success")[0]


# ---- Calibration -------------------------------------------------------------------------------------------------

def test_calibration_page_shows_fit_roofline_errors_and_provenance(results, app_env):
    app_env(results)
    at = open_page("calibration")
    no_exception(at)
    assert texts(at, "subheader") == ["Measured against fitted", "Roofline", "Error per op",
                                      "Profile h100_sxm.parquet", "Validation against a measured serving run"]
    assert len(at.get("vega_lite_chart")) == 3
    errors = at.dataframe[0].value
    assert set(zip(errors["op"], errors["dtype"], errors["impl"])) == {
        ("gemm", "bf16", "kernels.gemm"), ("gemm", "bf16", "torch.matmul"),
        ("gemm", "fp8_block", "kernels.gemm_fp8_block"), ("attn_decode", "bf16", "kernels.attn_paged_decode")}
    assert ("Charts show the 36 points on the profile's curves; the error table covers all 48, library baselines "
            "included.") in texts(at, "caption")
    assert set(errors["evaluated on"]) == {"held-out"}
    assert (errors["median |error| (%)"] < 5.5).all()  # the fixture's noise is within ±5 %
    provenance = dict(zip(at.dataframe[1].value["field"], at.dataframe[1].value["value"]))
    assert provenance["device"] == "NVIDIA H100 80GB HBM3" and provenance["git_commit"] == "abc1234"
    assert not at.warning


def test_calibration_page_degrades_when_columns_or_metadata_are_missing(fresh_results, app_env, factory):
    app_env(fresh_results)
    factory.make_calibration(fresh_results["calibration"], drop=("predicted_s", "flops"))
    factory.make_profile(fresh_results["profile"], with_metadata=False)
    at = open_page("calibration")
    no_exception(at)
    warnings = " ".join(texts(at, "warning"))
    assert "column `predicted_s` missing" in warnings and "column `flops` missing" in warnings
    assert "no provenance metadata" in warnings
    infos = " ".join(texts(at, "info"))
    assert "Needs `measured_s` and `predicted_s`" in infos and "Needs `flops`, `bytes`" in infos


def test_calibration_page_explains_an_unreadable_measurements_file(fresh_results, app_env):
    app_env(fresh_results)
    (fresh_results["calibration"] / "measurements.parquet").write_bytes(b"PAR1 not really")
    at = open_page("calibration")
    no_exception(at)
    assert any("not a readable Parquet file" in e for e in texts(at, "error"))


# ---- What-if -----------------------------------------------------------------------------------------------------

def fake_sim(monkeypatch, factory, fail: Exception | None = None) -> list[dict]:
    """Install a stand-in `sim.api` whose `run_scenario` writes a fixture run (4 instances) and reports progress."""
    calls: list[dict] = []

    def run_scenario(scenario, overrides, run_dir, progress=None):
        calls.append({"scenario": scenario, "overrides": list(overrides), "run_dir": Path(run_dir)})
        for f in (0.0, 0.004, 0.5, 1.0):
            progress(f)
        if fail:
            raise fail
        factory.make_run(Path(run_dir), instances=4, seed=9, scenario=scenario)
        (Path(run_dir) / ".hydra" / "overrides.yaml").unlink()  # like sim.api, which writes only config.yaml
        return Path(run_dir)

    module = types.ModuleType("sim.api")
    module.run_scenario = run_scenario
    monkeypatch.setitem(sys.modules, "sim.api", module)
    return calls


def test_whatif_says_when_the_simulator_is_unavailable(results, app_env, monkeypatch):
    app_env(results)
    monkeypatch.setitem(sys.modules, "sim.api", None)  # import fails with ModuleNotFoundError
    at = open_page("whatif")
    no_exception(at)
    assert any("What-if runs are unavailable" in w for w in texts(at, "warning"))
    assert at.form_submit_button[0].disabled


def test_whatif_runs_a_variant_and_compares_it_with_the_baseline(fresh_results, app_env, monkeypatch, factory):
    app_env(fresh_results)
    calls = fake_sim(monkeypatch, factory)
    at = open_page("whatif")
    no_exception(at)
    assert at.selectbox(key="whatif_baseline").value.path == fresh_results["good"]
    at.slider(key="whatif_pool_main").set_value(4)
    at.slider(key="whatif_load").set_value(1.5)
    at.selectbox(key="whatif_router").set_value("least_outstanding")
    at.text_area(key="whatif_extra").input("scenario.duration_s=300")
    at.form_submit_button[0].click().run()
    no_exception(at)
    [call] = calls
    assert call["scenario"] == "smoke"
    # the baseline's own `instances=3` override is replaced, `scenario=` is passed separately
    assert call["overrides"] == ["scenario.load_multiplier=1.5", "scenario.fleet.pools.main.instances=4",
                                 "router=least_outstanding", "scenario.duration_s=300"]
    assert call["run_dir"].parent == fresh_results["runs"] / "whatif" / "smoke"
    assert "What-if against baseline" in texts(at, "subheader")
    assert any(c.startswith("Cost model: analytical. No number here was measured on a GPU") for c in texts(at, "caption"))
    metrics = {m.label: m for m in at.metric}
    assert metrics["Total cost"].delta.startswith("+")  # 4 instances instead of 3 cost more
    delta_table = at.dataframe[0].value
    assert list(delta_table.columns) == ["figure", "baseline", "what-if", "change", "SLO"]
    assert len(at.get("vega_lite_chart")) == 1
    at.run()  # a rerun keeps showing the result without simulating again
    assert len(calls) == 1 and "What-if against baseline" in texts(at, "subheader")
    # the variant remembers its overrides, so it can be the next what-if's baseline
    from dashboard.data import open_run
    assert open_run(call["run_dir"]).overrides == ("scenario=smoke", *call["overrides"])


def test_whatif_changes_autoscaler_limits_and_overlays_tpot(fresh_results, app_env, monkeypatch, factory, tmp_path):
    """A pool with an autoscaler shows its limits; changed limits become overrides; the overlay has TPOT P99."""
    root = tmp_path / "scaled"
    factory.make_run(root / "smoke" / "2026-01-01_00-00-00", instances=3, autoscaler="reactive")
    app_env(fresh_results, roots=str(root))
    calls = fake_sim(monkeypatch, factory)
    at = open_page("whatif")
    no_exception(at)
    assert at.number_input(key="whatif_min_instances_main").value == 1
    assert at.number_input(key="whatif_max_instances_main").value == 6
    at.number_input(key="whatif_min_instances_main").set_value(3)
    at.number_input(key="whatif_max_instances_main").set_value(12)
    at.form_submit_button[0].click().run()
    no_exception(at)
    [call] = calls
    assert "scenario.fleet.pools.main.min_instances=3" in call["overrides"]
    assert "scenario.fleet.pools.main.max_instances=12" in call["overrides"]
    import pyarrow as pa

    [chart] = at.get("vega_lite_chart")
    series = set()
    for ds in chart.proto.datasets:  # the chart's data, as Arrow IPC
        series |= set(pa.ipc.open_stream(ds.data.data).read_all().column("series").to_pylist())
    assert {"TTFT P99 (s)", "TPOT P99 (s)", "Active instances"} <= series


def test_whatif_reports_a_failed_simulation_without_a_traceback(fresh_results, app_env, monkeypatch, factory):
    app_env(fresh_results)
    fake_sim(monkeypatch, factory, fail=RuntimeError("event queue empty"))
    at = open_page("whatif")
    at.form_submit_button[0].click().run()
    no_exception(at)
    assert texts(at, "error") == ["The simulation failed: RuntimeError: event queue empty"]


def test_whatif_rejects_lines_that_are_not_overrides(fresh_results, app_env, monkeypatch, factory):
    app_env(fresh_results)
    calls = fake_sim(monkeypatch, factory)
    at = open_page("whatif")
    at.text_area(key="whatif_extra").input("instances four")
    at.form_submit_button[0].click().run()
    no_exception(at)
    assert not calls
    assert texts(at, "error") == ["Not overrides (expected `key=value`): `instances four`"]
