"""The month priced from the traffic curve (sim/plan/month.py) and the seeds' choice (sim/plan/seeds.py)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from sim.compose import compose_config
from sim.config import load_run_config
from sim.plan.deploy import deployment_files
from sim.plan.month import HOURS_PER_MONTH, class_demand, month_usd, monthly_from_curve, pool_hours
from sim.plan.result import choose
from sim.plan.seeds import MAX_CANDIDATES, choose_over_seeds, without_seed


def test_a_pool_whose_traffic_doubles_half_the_day_costs_less_than_its_peak_all_month():
    demand = np.array([10.0] * 12 + [20.0] * 12)           # requests/s: double in 12 of 24 hours
    hours = pool_hours(demand, capacity_per_s=2.5, fixed=None, floor=1, cap=16)
    assert list(hours) == [4] * 12 + [8] * 12
    usd = month_usd(hours, usd_per_instance_hour=3.0)
    assert usd == pytest.approx((4 * 12 + 8 * 12) * 3.0 * HOURS_PER_MONTH / 24)
    assert usd < HOURS_PER_MONTH * 8 * 3.0 and usd == pytest.approx(0.75 * HOURS_PER_MONTH * 8 * 3.0)


def test_floors_caps_and_fixed_pools():
    demand = np.array([0.0] * 6 + [100.0] * 18)
    assert list(pool_hours(demand, 10.0, None, 2, 8)) == [2] * 6 + [8] * 18     # min_instances, max_instances
    assert list(pool_hours(demand, 10.0, 5, 5, 5)) == [5] * 24                   # a fixed-size pool
    assert list(pool_hours(demand, None, None, 3, 8)) == [3] * 24               # no requests seen: its floor


def test_class_demand_reads_daily_curves_with_flash_sales_and_constant_parts():
    traffic = {"kind": "mix", "parts": [
        {"name": "qa", "request_class": "qa", "kind": "daily", "curve_start_s": 72000, "duration_s": 7200,
         "curve": {"kind": "piecewise_linear", "rates_per_s": [1.0] * 12 + [2.0] * 12},
         "flash_sales": [{"start_s": 0, "ramp_s": 60, "hold_s": 600, "decay_s": 60, "peak_multiplier": 4}]},
        {"name": "batch", "request_class": "batch", "kind": "poisson", "rate_per_s": 3.0, "duration_s": 600},
        {"name": "chat", "request_class": "chat", "kind": "sessions"}]}
    demand, how = class_demand(traffic, {"chat": 0.5})
    qa = demand["qa"]
    assert qa[3] == pytest.approx(1.0) and qa[15] == pytest.approx(2.0)
    assert qa[20] == pytest.approx(8.0)       # the flash sale at 20:00 (the curve's t=0), x4 on 2 req/s
    assert list(demand["batch"]) == [3.0] * 24 and list(demand["chat"]) == [0.5] * 24
    assert len(how) == 3 and "daily curve" in how[0] and "simulated run" in how[2]


AUTOSCALED = ["scenario.traffic.num_requests=400", "autoscaler=reactive", "+scenario.pools.main.min_instances=1",
              "+scenario.pools.main.max_instances=4"]


def test_the_month_of_a_run_follows_its_curve_and_keeps_the_window_line(tmp_path):
    from omegaconf import OmegaConf

    from sim.api import run_scenario

    out = run_scenario("smoke", ["metrics.progress=false", *AUTOSCALED], tmp_path)
    config = OmegaConf.to_container(compose_config(["scenario=smoke", *AUTOSCALED]), resolve=True)
    summary = json.loads((out / "summary.json").read_text())
    month = monthly_from_curve(config, summary, out, fixed_pools=set())
    pool = month["pools"]["main"]
    assert pool["capacity_per_instance_per_s"] > 0 and not pool["fixed"]
    need = int(np.ceil(8.0 / pool["capacity_per_instance_per_s"] - 1e-9))
    assert pool["instances_by_hour"] == [min(4, max(1, need))] * 24       # constant 8 req/s all day
    assert month["usd_per_month"] == pytest.approx(sum(pool["instances_by_hour"]) * 2.99 * HOURS_PER_MONTH / 24)
    assert month["window_usd_per_month"] == pytest.approx(
        summary["cost"]["usd"] / summary["simulated_duration_s"] * 3600 * HOURS_PER_MONTH)
    assert any("busiest minute" in a for a in month["assumptions"])
    fixed = monthly_from_curve(config, summary, out, fixed_pools={"main"})
    assert fixed["pools"]["main"]["instances_by_hour"] == [2] * 24

    run = load_run_config(compose_config(["scenario=smoke"]))
    bom = yaml.safe_load(deployment_files(run, summary, None, "test run", month)["bom.yaml"])["monthly"]
    assert bom["usd_per_month"] == pytest.approx(month["usd_per_month"]) and "traffic curve" in bom["basis"]
    assert bom["if_the_window_ran_all_month"]["usd_from_simulated_run"] == pytest.approx(
        month["window_usd_per_month"])


def _row(i: int, usd: float, meets: bool = True):
    from sim.plan.result import Row

    return Row(SimpleNamespace(id=i, overrides=(f"n={i}",)), usd, meets, meets)


class FakeRunner:
    """Seeds verdicts by configuration id."""

    def __init__(self, ok: dict[int, bool]) -> None:
        self.ok, self.checked = ok, {}

    def check(self, outcome) -> dict:
        self.checked[outcome.id] = {"all_meet": self.ok[outcome.id],
                                    "runs": [{"seed": 0, "meets": True}, {"seed": 1, "meets": self.ok[outcome.id]}]}
        return self.checked[outcome.id]


def test_a_choice_failing_on_another_seed_is_passed_over_for_the_next_candidate():
    rows = [_row(0, 1.0, meets=False), _row(1, 2.0), _row(2, 3.0), _row(3, 4.0)]
    passed_over, notes = choose_over_seeds(rows, FakeRunner({1: False, 2: True, 3: True}), choose)
    assert passed_over == {1} and choose(rows, passed_over)[0].id == 2
    assert "seed 1" in notes[0] and "passed over" in notes[0]


def test_when_no_candidate_meets_on_every_seed_the_cheapest_stays_flagged():
    rows = [_row(i, float(i + 1)) for i in range(MAX_CANDIDATES + 1)]
    runner = FakeRunner({i: False for i in range(len(rows))})
    passed_over, notes = choose_over_seeds(rows, runner, choose)
    assert passed_over == set() and choose(rows, passed_over)[0].id == 0
    assert len(runner.checked) == MAX_CANDIDATES and "widen the search" in notes[-1]


def test_the_seed_runs_drop_a_seed_override_of_the_base():
    assert without_seed(("scenario=smoke", "seed=7", "++seed=3", "metrics.seed_x=1")) == \
        ("scenario=smoke", "metrics.seed_x=1")
