"""Closed-loop clients (`traffic.kind: closed_loop`) on hand-computable timings (synthetic 10 ms iterations)."""
from __future__ import annotations

import numpy as np
import pytest

from inferplan.errors import InputError
from sim.api import scenario_workload
from sim.simulate import simulate

from tests.sim.helpers import run_config

def run_simulation(run):
    return simulate(run, scenario_workload(run))


STEP = ["cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0", "scenario.frontend_overhead_s=0",
        "scenario.pools.main.instances=1", "batching=continuous"]


def closed(clients: int, requests: int, think_s: float = 0.0):
    return ["~scenario.traffic", f"+scenario.traffic={{kind: closed_loop, clients: {clients}, requests: {requests}, "
            f"think_time_s: {think_s}, lengths: {{kind: fixed, prompt_tokens: 10, output_tokens: 2}}}}"]


def test_one_client_sends_the_next_request_when_the_previous_ends():
    # One client, 3 requests of 2 tokens: [prefill] 10 ms + [decode] 10 ms = 20 ms each, then 5 ms of thought:
    # arrivals 0, .025, .05; each E2E .02.
    res = run_simulation(run_config(*STEP, *closed(1, 3, 0.005)))
    r = res.requests
    assert np.allclose(r["arrival_s"], [0.0, 0.025, 0.05]) and np.allclose(r["e2e_s"], 0.02)
    assert (r["status"] == "completed").all()


def test_two_clients_keep_two_requests_in_flight():
    # Two clients, no think time: both requests batch together (prefill .01, decode .02), the next two are sent at
    # .02 and run the same way: arrivals [0, 0, .02, .02], finishes [.02, .02, .04, .04].
    res = run_simulation(run_config(*STEP, *closed(2, 4)))
    r = res.requests
    assert np.allclose(r["arrival_s"], [0, 0, 0.02, 0.02]) and np.allclose(r["finish_s"], [0.02, 0.02, 0.04, 0.04])


def test_closed_loop_keys_are_checked():
    with pytest.raises(InputError):
        run_simulation(run_config(*STEP, "~scenario.traffic", "+scenario.traffic={kind: closed_loop, clients: 0, requests: 3, "
                                         "lengths: {kind: fixed, prompt_tokens: 10, output_tokens: 2}}"))


def test_drain_timeout_counts_from_the_last_send_not_from_zero():
    # One client, 3 requests of 20 ms each: sent at 0, .02, .04, all done at .06. A 30 ms drain timeout from t = 0
    # would stop the run at .03; counted from the last send (.04) it ends at .07, after the last finish.
    res = run_simulation(run_config(*STEP, *closed(1, 3), "scenario.drain_timeout_s=0.03"))
    r = res.requests
    assert (r["status"] == "completed").all() and np.allclose(r["finish_s"], [0.02, 0.04, 0.06])
    # A 10 ms timeout still ends the run 10 ms after the last send: the first request (20 ms) is unfinished.
    cut = run_simulation(run_config(*STEP, *closed(1, 3), "scenario.drain_timeout_s=0.01"))
    assert list(cut.requests["status"]) == ["unfinished"]
    assert cut.summary["simulated_duration_s"] == pytest.approx(0.01)
