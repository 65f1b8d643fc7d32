"""The foundation slice: invariants of every run, determinism, and hand-summed latencies."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scenarios.workload import Workload
from sim.core.cost.base import BatchShape
from sim.results.write import write_run
from sim.simulate import simulate

from tests.sim.helpers import poisson_workload, run_config


def test_every_request_has_exactly_one_status_and_ordered_times():
    run = run_config("scenario.drain_timeout_s=5")
    wl = poisson_workload(300, rate_per_s=20.0, seed=1)
    res = simulate(run, wl)
    cols = res.requests
    assert len(cols["status"]) == len(wl)
    assert set(np.unique(cols["status"])) <= {"completed", "rejected", "unfinished"}
    s = res.summary["requests"]
    assert s["completed"] + s["rejected"] + s["unfinished"] == s["arrived"] == len(wl)
    ok = np.isfinite(cols["first_token_s"])
    assert np.all(cols["arrival_s"][ok] <= cols["first_token_s"][ok])
    done = cols["status"] == "completed"
    assert np.all(cols["first_token_s"][done] <= cols["finish_s"][done])
    assert all(v == "ok" for v in res.summary["invariants"].values()), res.summary["invariants"]


def test_short_drain_leaves_unfinished_requests_with_status():
    # 20 req/s of ~64-token outputs cannot all finish 5 ms after the last arrival.
    run = run_config("scenario.drain_timeout_s=0.005")
    wl = poisson_workload(200, rate_per_s=50.0, seed=2)
    res = simulate(run, wl)
    assert res.summary["requests"]["unfinished"] > 0
    unfinished = res.requests["status"] == "unfinished"
    assert np.all(np.isnan(res.requests["finish_s"][unfinished]))


def test_same_seed_gives_byte_identical_parquet(tmp_path):
    run = run_config()
    wl = poisson_workload(200, rate_per_s=10.0, seed=3)
    a = write_run(simulate(run, wl), tmp_path / "a")
    b = write_run(simulate(run, wl), tmp_path / "b")
    for name in ("requests.parquet", "timeseries.parquet", "pools.parquet"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_one_request_latency_equals_hand_summed_step_times():
    """One instance, one request of P prompt and O output tokens: TTFT is the front-end overhead plus one
    prefill step; each later token is one decode step whose context grows by one."""
    P, O, overhead = 300, 5, 0.002
    run = run_config("scenario.pools.main.instances=1", f"scenario.frontend_overhead_s={overhead}")
    wl = Workload.from_columns([1.0], [P], [O])
    res = simulate(run, wl)
    import simpy
    from sim.core.fleet.pool import Pool
    cost = Pool(simpy.Environment(), "main", run.pools["main"], run, on_finish=None, on_first_token=None).cost
    prefill = cost.step_cost(BatchShape(prefill_seqs=1, prefill_tokens=P, prefill_q_ctx_sum=0,
                                        prefill_q_sq_sum=P * (P + 1) // 2, prefill_kv_tokens=P, sampled_seqs=1)).total_s
    decodes = [cost.step_cost(BatchShape(decode_seqs=1, decode_ctx_sum=P + k + 1, sampled_seqs=1)).total_s
               for k in range(O - 1)]
    cols = res.requests
    assert cols["ttft_s"][0] == pytest.approx(overhead + prefill, rel=1e-12)
    assert cols["e2e_s"][0] == pytest.approx(overhead + prefill + sum(decodes), rel=1e-12)
    assert cols["tpot_s"][0] == pytest.approx(sum(decodes) / (O - 1), rel=1e-12)
    assert res.summary["pools"]["main"]["iterations"] == O


def test_request_longer_than_context_is_rejected_with_reason():
    run = run_config()
    wl = Workload.from_columns([0.0, 0.1], [100, 9000], [10, 10])
    res = simulate(run, wl)
    assert list(res.requests["status"]) == ["completed", "rejected"]
    assert list(res.requests["reject_reason"]) == ["", "too_long"]
    assert math.isnan(res.requests["ttft_s"][1])
