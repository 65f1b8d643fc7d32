"""Pricing runs of decode iterations in one event gives the same results as stepping one iteration at a time."""
from __future__ import annotations

import numpy as np
import pytest

from sim.simulate import simulate

from tests.sim.helpers import poisson_workload, run_config


@pytest.mark.parametrize("batching", ["continuous", "chunked_prefill", "static", "dynamic"])
def test_fast_forward_equals_stepping(batching):
    wl = poisson_workload(400, rate_per_s=15.0, seed=11, prompt_median=300, output_median=80)
    common = [f"batching={batching}", "scenario.pools.main.instances=2"]
    fast = simulate(run_config(*common, "fast_forward=true"), wl)
    slow = simulate(run_config(*common, "fast_forward=false"), wl)
    for col in ("first_token_s", "finish_s", "ttft_s", "e2e_s"):
        np.testing.assert_allclose(fast.requests[col], slow.requests[col], rtol=0, atol=1e-9, err_msg=col)
    for col in ("status", "instance", "preemptions"):
        assert list(fast.requests[col]) == list(slow.requests[col]), col
    pf, ps = fast.summary["pools"]["main"], slow.summary["pools"]["main"]
    assert pf["iterations"] == ps["iterations"]
    for part, v in ps["time_breakdown_s"].items():
        assert pf["time_breakdown_s"][part] == pytest.approx(v, rel=1e-9, abs=1e-12)


def test_fast_forward_under_kv_pressure_equals_stepping():
    wl = poisson_workload(150, rate_per_s=30.0, seed=5, prompt_median=200, output_median=100)
    common = ["scenario.pools.main.instances=1", "+scenario.pools.main.num_gpu_blocks_override=120"]
    fast = simulate(run_config(*common, "fast_forward=true"), wl)
    slow = simulate(run_config(*common, "fast_forward=false"), wl)
    assert slow.requests["preemptions"].sum() > 0  # the case exercises preemption
    np.testing.assert_allclose(fast.requests["finish_s"], slow.requests["finish_s"], rtol=0, atol=1e-9)
    assert list(fast.requests["preemptions"]) == list(slow.requests["preemptions"])


@pytest.mark.parametrize("extra", [["batching.max_num_seqs=3"], ["+scenario.pools.main.num_gpu_blocks_override=90"],
                                   ["batching=chunked_prefill", "+scenario.pools.main.num_gpu_blocks_override=90",
                                    "batching.token_budget=64"]])
def test_fast_forward_past_blocked_admissions_equals_stepping(extra):
    """Runs go on while the head of `waiting` is kept out (all sequence slots taken, too little KV, too little
    token budget), and arrivals behind it do not cut them short: still exactly what stepping gives."""
    wl = poisson_workload(200, rate_per_s=40.0, seed=3, prompt_median=150, output_median=120)
    common = ["scenario.pools.main.instances=1", *extra]
    fast = simulate(run_config(*common, "fast_forward=true"), wl)
    slow = simulate(run_config(*common, "fast_forward=false"), wl)
    np.testing.assert_allclose(fast.requests["finish_s"], slow.requests["finish_s"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(fast.requests["first_token_s"], slow.requests["first_token_s"], rtol=0, atol=1e-9)
    assert list(fast.requests["preemptions"]) == list(slow.requests["preemptions"])
    assert fast.summary["pools"]["main"]["iterations"] == slow.summary["pools"]["main"]["iterations"]


def test_simultaneous_arrivals_at_an_idle_instance_share_its_first_iteration():
    """Requests due at the same time reach an idle instance before it plans: one iteration prefills them all
    (continuous batching), so their first tokens come together."""
    from scenarios.workload import Workload
    wl = Workload.from_columns(np.array([1.0, 1.0, 1.0, 5.0]), np.array([100, 200, 300, 100]),
                               np.array([20, 20, 20, 20]))
    for ff in ("true", "false"):
        res = simulate(run_config("scenario.pools.main.instances=1", f"fast_forward={ff}"), wl)
        first = res.requests["first_token_s"]
        assert first[0] == first[1] == first[2] > 1.0, ff
        assert res.summary["pools"]["main"]["iterations"] == 20 + 20, ff  # 1 prefill + 19 decodes, twice


def test_a_first_token_inside_a_run_the_end_of_the_simulation_cuts_is_recorded_as_stepping_records_it():
    """The drain timeout ends the simulation inside a run whose first iteration already ended: its first token was
    sent then (its own event), so the unfinished request shows it, as when stepping one iteration at a time."""
    from scenarios.workload import Workload
    wl = Workload.from_columns(np.array([0.0]), np.array([500]), np.array([5000]))
    for ff in ("true", "false"):
        res = simulate(run_config("scenario.pools.main.instances=1", "scenario.drain_timeout_s=5",
                                  "scenario.frontend_overhead_s=0", f"fast_forward={ff}"), wl)
        assert list(res.requests["status"]) == ["unfinished"], ff
        assert 0.0 < res.requests["first_token_s"][0] < 5.0, ff
