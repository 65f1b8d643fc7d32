"""The dashboard's plan answer (confidence and its cost, seeds, the month) and its deployment button's entry point
(`sim.api.write_plan_deployment`, the files `python -m sim.plan ... deploy=` writes)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from dashboard.deployment import answer_lines
from inferplan.errors import InputError
from sim.api import write_plan_deployment

PLAN = {
    "confidence": {"level": 0.9},
    "chosen": {"id": 1, "override_args": ["scenario.pools.main.instances=2"],
               "seeds": {"runs": [{"seed": 0, "meets": True}, {"seed": 1, "meets": True}, {"seed": 2, "meets": False}]},
               "month": {"usd_per_month": 4365.4}, "usd_per_month_basis": "730 h of the scenario's day"},
    "point_estimate_choice": {"id": 2},
    "confidence_cost_usd_per_hour": 3.0072, "confidence_cost_usd_per_month": 2182.7,
}


def test_the_answer_names_the_confidence_its_cost_the_seeds_and_the_month():
    lines = answer_lines(PLAN)
    assert lines[0] == "Chosen: #1 scenario.pools.main.instances=2"
    assert "confidence 0.9" in lines[1] and "$+3.01/h, $+2,183/month" in lines[1]
    assert lines[2] == "Traffic seeds: 2 of 3 meet every SLO."
    assert lines[3] == "Month from the traffic curve: $4,365 (730 h of the scenario's day)."


def test_the_same_choice_at_the_point_estimate_costs_nothing():
    same = {**PLAN, "point_estimate_choice": {"id": 1}}
    assert "costs nothing here" in answer_lines(same)[1]


def test_a_plan_without_a_choice_has_nothing_to_deploy():
    assert answer_lines({"chosen": None}) == [
        "No configuration meets every SLO at the plan's confidence: nothing to deploy."]


def test_a_folder_without_a_plan_is_refused_in_one_line(tmp_path):
    with pytest.raises(InputError, match="plan.json"):
        write_plan_deployment(tmp_path)


def test_the_button_writes_what_the_planner_writes(tmp_path):
    plan_dir = tmp_path / "plan"
    subprocess.run([sys.executable, "-m", "sim.plan", "scenario=smoke", "jobs=1", "seeds=1",
                    "search.scenario.pools.main.instances=[1,2]", f"out_dir={plan_dir}"], check=True,
                   capture_output=True, text=True, timeout=300, cwd=tmp_path)
    files = write_plan_deployment(plan_dir)
    names = {p.relative_to(plan_dir / "deploy").as_posix() for p in files}
    assert {"README.md", "bom.yaml", "main/launch.sh", "main/kubernetes.yaml"} <= names
    assert f"Reproduces the simulated plan {plan_dir / 'plan.json'}" in (plan_dir / "deploy" / "README.md").read_text()
