"""N+1 headroom in the planner (sim/plan/redundancy.py): with `redundancy=n+1` each configuration also runs with one
instance failed at the traffic's peak, passes only if both runs meet every SLO, and the plan shows both."""
from __future__ import annotations

import json

import pytest

from inferplan.errors import InputError
from sim.plan import parse_args, plan
from sim.plan.console import print_plan

# The smoke scenario, shortened: 300 Poisson arrivals at 8 req/s (~37 s); one H100 meets its SLOs alone.
SMOKE = ("scenario=smoke", "scenario.traffic.num_requests=300", "search.scenario.pools.main.instances=[1,2,3]",
         "jobs=1", "progress=false")


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    root = tmp_path_factory.mktemp("n1")
    common = [*SMOKE, f"cache_dir={root / 'cache'}"]
    without, _ = plan(parse_args([*common, f"out_dir={root / 'plain'}"]), "test")
    with_n1, path = plan(parse_args([*common, "redundancy=n+1", f"out_dir={root / 'n1'}"]), "test")
    return without, with_n1, path


def instances(entry: dict) -> int:
    return entry["overrides"]["scenario.pools.main.instances"]


def test_n_plus_1_makes_the_smoke_plan_pick_more_instances(plans):
    without, with_n1, _ = plans
    assert without["chosen"] is not None and with_n1["chosen"] is not None
    assert instances(without["chosen"]) == 1
    assert instances(with_n1["chosen"]) > instances(without["chosen"])
    assert without["chosen"]["n_plus_1"] is None and without["redundancy"] is None


def test_both_runs_are_shown_and_both_must_pass(plans):
    _, doc, path = plans
    assert doc["redundancy"]["pools"] == ["main"]
    by_count = {instances(c): c for c in doc["configurations"]}
    one = by_count[1]
    # One instance meets the SLOs as it is, but not with it failed: its requests are rejected and arrivals wait
    # for the replacement (one cold start of repair, then the cold start itself).
    assert one["slos"] and all(c["met"] for c in one["slos"]) and not one["meets_slos"]
    assert one["n_plus_1"]["meets_slos"] is False and one["n_plus_1"]["failures"]["main"]["count"] == 1
    assert {c.get("run") for c in one["failed_slos"]} == {"n+1"}
    chosen = doc["chosen"]
    assert chosen["n_plus_1"]["meets_slos"] is True and chosen["n_plus_1"]["requests_failed_over"] > 0
    assert chosen["n_plus_1"]["failures"]["main"]["causes"] == ["scheduled"]
    assert (path.parent / chosen["n_plus_1"]["run_dir"] / "summary.json").is_file()
    summary = json.loads((path.parent / chosen["n_plus_1"]["run_dir"] / "summary.json").read_text())
    assert summary["failures"]["pools"]["main"]["count"] == 1
    assert doc["jobs"]["runs_per_configuration"] == 2


def test_the_console_shows_the_n_plus_1_run(plans, capsys):
    _, doc, path = plans
    print_plan(doc, path, width=120)
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "PASS"
    assert "with one instance of each n+1 pool failed at the peak: meets every SLO" in out
    assert "N+1 margin: default ttft_p99" in out and "fails: with one instance failed (N+1):" in out


def test_a_bad_redundancy_option_is_refused():
    with pytest.raises(InputError, match=r"redundancy: unknown redundancy 'n\+2'"):
        parse_args(["scenario=smoke", "redundancy=n+2"])
