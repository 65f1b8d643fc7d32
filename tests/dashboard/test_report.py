"""`python -m dashboard.report`: the self-contained HTML record of a run, a sweep or a plan; one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard import compare, report
from dashboard.htmlkit import svg_renderer_available
from dashboard.kpis import kpis

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "dashboard.report", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_run_report_holds_kpis_verdicts_charts_config_and_provenance(results, tmp_path):
    out = tmp_path / "run.html"
    assert report.main([str(results["good"]), "-o", str(out)]) == 0
    html = out.read_text()
    summary = json.loads((results["good"] / "summary.json").read_text())
    for k in kpis(summary):
        assert f'<div class="label">{k.label}</div><div class="value">{k.show()}</div>' in html
    assert "Every SLO is met." in html
    # the SLO table (TTFT, TPOT, served) and the two verdict tables: by class (default, all) and by class and
    # pool (default@main, all@main), 3 SLOs each
    assert html.count('<td class="met">met</td>') == 3 + 2 * 3 + 2 * 3
    assert "<h2>Diagnosis</h2>" in html and "Nothing to diagnose" in html
    assert "No number here was measured on a GPU" in html and "Monthly projection" in html
    assert "Arrival rate against capacity" in html and "Requests not served, by reason" in html
    assert "load_multiplier: 1.0" in html  # .hydra/config.yaml
    assert "request_conservation" in html and "analytical" in html  # provenance
    if svg_renderer_available():
        assert html.count("<svg") >= 8
    else:
        assert "vl-convert-python" in html and "&quot;$schema&quot;" in html  # the spec, escaped


def test_report_is_self_contained(results, tmp_path):
    out = tmp_path / "run.html"
    report.main([str(results["good"]), "-o", str(out)])
    html = out.read_text()
    assert "<script" not in html and "<link" not in html and 'src="http' not in html


def test_sweep_report_names_the_cheapest_configuration_meeting_the_slo(results, tmp_path):
    out = tmp_path / "sweep.html"
    assert report.main([str(results["sweep"]), "-o", str(out)]) == 0
    html = out.read_text()
    assert "Cheapest configuration meeting the SLO: scenario.fleet.pools.main.instances=2" in html
    assert html.count('<td class="missed">no</td>') == 1 and html.count('<td class="met">yes</td>') == 3
    assert "Pareto frontier" in html
    assert "4 runs, all priced the same way. Cost model: analytical. No number here was measured on a GPU" in html


def test_plan_report_shows_the_plan_and_its_configurations(results, tmp_path):
    out = tmp_path / "plan.html"
    assert report.main([str(results["plan"]), "-o", str(out)]) == 0
    html = out.read_text()
    assert "inferplan plan" in html and "chosen.scenario.fleet.pools.main.instances" in html
    assert "Cheapest configuration meeting the SLO" in html
    assert "all priced the same way. Cost model: analytical." in html


def test_cli_writes_report_html_into_the_folder_by_default(fresh_results):
    done = cli(str(fresh_results["good2"]), cwd=fresh_results["base"])
    assert done.returncode == 0, done.stderr
    assert (fresh_results["good2"] / "report.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("folder, expected", [
    ("missing", "not found"),
    ("half", "half-written run: no DONE marker"),
    ("corrupt", "not a readable Parquet file"),
    ("empty", "is not a run, sweep or plan folder"),
])
def test_cli_bad_folder_prints_one_line_and_exits_2(results, tmp_path, folder, expected):
    path = tmp_path / "missing" if folder == "missing" else results[folder]
    done = cli(str(path), "-o", str(tmp_path / "out.html"), cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out.html").exists()


def test_partial_run_report_says_so_and_names_no_cause(results, tmp_path):
    out = tmp_path / "partial.html"
    assert report.main([str(results["partial"]), "-o", str(out)]) == 0
    html = out.read_text()
    summary = json.loads((results["partial"] / "summary.json").read_text())
    assert summary["diagnosis"] and summary["requests"]["unfinished"] > 0  # what the report must not present
    assert (f'<div class="banner partial">Partial run: interrupted at simulated t = '
            f'{summary["simulated_duration_s"]:,.1f} s; {summary["requests"]["unfinished"]:,} requests unfinished; '
            "latencies and costs cover only what was simulated.</div>") in html
    assert "<h1>inferplan review: smoke (partial)</h1>" in html
    assert "<title>inferplan review: smoke (partial)</title>" in html
    assert ("Partial run: no cause is named and no change is suggested for a window the simulation did not "
            "finish") in html
    assert "cause:" not in html and "<p>Try:</p>" not in html
    for finding in summary["diagnosis"]:
        assert not any(knob in html for knob in finding["try"])


def test_complete_run_report_has_no_partial_banner_and_keeps_its_diagnosis(results, tmp_path):
    out = tmp_path / "missed.html"
    assert report.main([str(results["missed"]), "-o", str(out)]) == 0
    html = out.read_text()
    assert "Partial run" not in html and "(partial)" not in html
    assert "cause: queueing" in html and "<p>Try:</p>" in html


def test_comparison_report_marks_a_partial_run_by_name(results):
    df, notes = compare.runs_frame([results["good"], results["partial"]],
                                   ["runs/smoke/2026-11-30_11-00-00", "runs/smoke/2026-11-30_08-30-00"])
    html = "\n".join(report.comparison_sections(df, "inferplan comparison", "chosen runs", notes))
    assert "<td>runs/smoke/2026-11-30_08-30-00 (partial)</td>" in html  # the side-by-side table
    assert "<td>runs/smoke/2026-11-30_11-00-00</td>" in html
