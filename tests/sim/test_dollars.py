"""Dollars have one owner (sim/core/fleet/billing.py `pool_usd`): the time series' `cost_usd` is the bill to
date under the same rule as the summary's `cost.usd`, so its last row equals it."""
from __future__ import annotations

import math

from sim.core.fleet.billing import instance_billed_s
from sim.simulate import simulate
from tests.sim.helpers import poisson_workload, run_config

SYNTH = ["cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0", "scenario.frontend_overhead_s=0",
         "scenario.pools.main.instances=2", "+scenario.pools.main.usd_per_hour=3.6"]


def test_the_time_series_cost_is_the_bill_to_date_and_ends_at_the_summary_cost():
    run = run_config(*SYNTH, "scenario.billing_granularity_s=10", "metrics.sample_interval_s=1")
    res = simulate(run, poisson_workload(50, 10.0, seed=2))
    ts, usd = res.timeseries_columns["t_s"], res.timeseries_columns["cost_usd"]
    # Two instances alive from t=0 at 3.6 USD/h = 0.001 USD/s each, billed in whole 10 s blocks.
    for t, c in zip(ts.tolist(), usd.tolist()):
        assert math.isclose(c, 2 * math.ceil(t / 10 - 1e-9) * 10 * 0.001, rel_tol=1e-12), t
    assert usd[-1] == res.summary["cost"]["usd"]


def test_instance_billing_rounds_up_per_instance():
    assert instance_billed_s(0.0, 12.0, 99.0, 10.0) == 20.0          # stopped: billed to its stop
    assert instance_billed_s(5.0, float("nan"), 25.0, 10.0) == 20.0  # alive: billed to the time asked
    assert instance_billed_s(0.0, float("nan"), 2.5, 0.0) == 2.5     # granularity 0: exact seconds
