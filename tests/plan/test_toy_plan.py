"""The planner on a problem solved by hand (tests/plan/toy.py): its answer, re-simulated, meets the SLOs; the
next-cheaper configuration, re-simulated, does not; and the plan folder is what the dashboard reads."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from sim.api import run_scenario
from sim.plan import parse_args, plan
from sim.plan.result import SCHEMA

from tests.plan.toy import CHOSEN, NEXT_CHEAPER, SEARCH, TOY


@pytest.fixture(scope="module")
def toy_plan(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    args = [*TOY, *SEARCH, f"out_dir={root / 'plan'}", f"cache_dir={root / 'cache'}", "jobs=1", "progress=false"]
    doc, path = plan(parse_args(args), "test")
    return doc, path


def _resimulate(tmp_path, overrides: dict) -> dict:
    """A fresh simulation (no cache) of the toy with `overrides`; its summary."""
    extra = [f"{k}={v}" for k, v in overrides.items()]
    out = run_scenario("smoke", [*TOY[1:], "metrics.progress=false", *extra], tmp_path)
    return json.loads((out / "summary.json").read_text())


def test_the_planner_finds_the_hand_derived_optimum(toy_plan):
    doc, _ = toy_plan
    assert doc["chosen"]["overrides"] == CHOSEN
    assert doc["next_cheaper_failing"]["overrides"] == NEXT_CHEAPER
    assert doc["next_cheaper_failing"]["objective"] < doc["chosen"]["objective"]
    why = {c["name"]: c for c in doc["next_cheaper_failing"]["failed_slos"]}
    assert set(why) == {"ttft_p99"}
    # Hand estimate: P99 TTFT about 4.9 s against the 1 s target (toy.py).
    assert why["ttft_p99"]["achieved"] == pytest.approx(4.9, abs=0.15)
    assert why["ttft_p99"]["margin"] == pytest.approx(1.0 - why["ttft_p99"]["achieved"])


def test_the_chosen_margins_are_target_minus_achieved(toy_plan):
    doc, _ = toy_plan
    slos = {(c["name"], c["class"]): c for c in doc["chosen"]["slos"]}
    ttft = slos[("ttft_p99", "default")]
    assert ttft["met"] and 0.01 <= ttft["achieved"] <= 0.02     # one or two 10 ms iterations
    assert ttft["margin"] == pytest.approx(1.0 - ttft["achieved"])
    assert ttft["margin_pct"] == pytest.approx(100 * ttft["margin"] / 1.0)
    served = slos[("served_fraction", "*")]
    assert served["achieved"] == 1.0 and served["margin"] == pytest.approx(1.0 - 0.9999)


def test_bisection_simulates_far_fewer_than_the_grid(toy_plan):
    doc, _ = toy_plan
    jobs = doc["jobs"]
    assert jobs["search_space_size"] == 16
    # per line: the largest count, then log2(7) ~ 3 bisection steps
    assert jobs["configurations"] == jobs["simulated"] == 8
    seen_m1 = sorted(c["overrides"]["scenario.pools.main.instances"] for c in doc["configurations"]
                     if c["overrides"]["batching.max_num_seqs"] == 1)
    assert seen_m1 == [4, 5, 6, 8]       # 8 passes; 4 fails, 6 passes, 5 passes: the answer for m = 1 is 5


def test_the_answer_resimulated_meets_the_slos(toy_plan, tmp_path):
    summary = _resimulate(tmp_path, CHOSEN)
    assert all(summary["slo"]["met"].values())
    assert all(all(c["met"].values()) for c in summary["slo"]["classes"].values())


def test_the_next_cheaper_resimulated_fails(toy_plan, tmp_path):
    summary = _resimulate(tmp_path, NEXT_CHEAPER)
    assert summary["slo"]["met"]["ttft_p99"] is False
    assert summary["latency_s"]["ttft"]["p99"] > 1.0


def test_the_frontier_is_pareto_optimal_in_cost_and_latency(toy_plan):
    doc, _ = toy_plan
    rows = {c["id"]: c for c in doc["configurations"]}
    front = doc["frontier"]["ttft_p99_s"]
    assert doc["chosen"]["id"] in front
    for i in front:
        a = rows[i]
        assert not any(b["objective"] <= a["objective"] and b["ttft_p99_s"] <= a["ttft_p99_s"] and
                       (b["objective"], b["ttft_p99_s"]) != (a["objective"], a["ttft_p99_s"]) for b in rows.values())
    costs = [rows[i]["objective"] for i in front]
    assert costs == sorted(costs)


def test_the_plan_folder_is_a_sweep_the_dashboard_reads(toy_plan):
    doc, path = toy_plan
    folder = path.parent
    on_disk = json.loads(path.read_text())
    assert on_disk["schema"] == SCHEMA and on_disk["chosen"]["id"] == doc["chosen"]["id"]
    table = pq.read_table(folder / "sweep.parquet").to_pandas()
    assert len(table) == doc["jobs"]["configurations"]
    assert {"job", "run_dir", "status", "usd", "ttft_p99_s", "slo_met", "scenario.pools.main.instances",
            "batching.max_num_seqs"} <= set(table.columns)
    chosen = table[table["job"] == doc["chosen"]["id"]].iloc[0]
    assert bool(chosen["slo_met"]) and chosen["scenario.pools.main.instances"] == 3
    for run_dir in table["run_dir"]:
        assert (folder / run_dir / "DONE").is_file() and (folder / run_dir / ".hydra" / "config.yaml").is_file()

    from dashboard.compare import annotate, sweep_frame
    frame, notes = sweep_frame(folder)
    best = annotate(frame, "usd", "ttft_p99_s")
    assert notes == [] and best.loc[best["cheapest"], "job"].tolist() == [doc["chosen"]["id"]]
