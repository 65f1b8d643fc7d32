"""Send-time reconstruction, the client semaphore, and the comparison arithmetic on hand-computed cases."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inferplan.errors import InputError
from sim.validate.arrivals import client_send_times, reconstruct, scheduled_send_times
from sim.validate.compare import compare, load_levels, pct_error, throughput
from sim.validate.measured import MeasuredRun, tpot_from
from sim.validate.replay import Replay


def measured(arrival, prompt, output, ttft, e2e, **kw) -> MeasuredRun:
    arrival = None if arrival is None else np.asarray(arrival, dtype=float)
    output = np.asarray(output)
    ttft, e2e = np.asarray(ttft, dtype=float), np.asarray(e2e, dtype=float)
    n = len(ttft)
    return MeasuredRun(path="m.json", format="vllm", version="V25a", index=np.arange(n), arrival_s=arrival,
                       prompt_tokens=np.asarray(prompt), output_tokens=output, ttft_s=ttft,
                       tpot_s=tpot_from(ttft, e2e, output), e2e_s=e2e, sent_requests=kw.pop("sent", n),
                       arrival_source="log" if arrival is not None else "none", **kw)


def fake_replay(send, ttft, e2e, output, status=None) -> Replay:
    ttft, e2e = np.asarray(ttft, dtype=float), np.asarray(e2e, dtype=float)
    n = len(ttft)
    return Replay(send_s=np.asarray(send, dtype=float), ttft_s=ttft, tpot_s=tpot_from(ttft, e2e, np.asarray(output)),
                  e2e_s=e2e, status=np.array(status or ["completed"] * n, dtype=object),
                  busy_fraction=np.full(n, 0.6), running=np.ones(n), result=None)


def test_infinite_rate_sends_everything_at_zero():
    np.testing.assert_array_equal(scheduled_send_times(4, math.inf, 1.0, 0, False), np.zeros(4))


def test_poisson_schedule_has_the_rate_and_starts_at_zero():
    t = scheduled_send_times(20000, 5.0, 1.0, 3, False)
    assert t[0] == 0.0 and np.all(np.diff(t) >= 0)
    assert np.mean(np.diff(t)) == pytest.approx(0.2, rel=0.02)


def test_rescaled_schedule_ends_at_n_over_rate():
    t = scheduled_send_times(100, 4.0, 0.5, 1, True)
    assert t[-1] == pytest.approx(25.0)


def test_reconstruct_uses_the_log_rate_and_seed_and_skips_failed_rows():
    m = measured(None, [10, 10], [5, 5], [0.1, 0.1], [0.5, 0.5], client={"request_rate": 2.0, "seed": 7.0}, sent=3)
    m = m.with_(index=np.array([0, 2]))
    r = reconstruct(m)
    expected = scheduled_send_times(3, 2.0, 1.0, 7, False)[[0, 2]]
    np.testing.assert_allclose(r.arrival_s, expected - expected[0])
    assert r.arrival_source == "reconstructed"
    assert "Poisson at 2 req/s, seed 7" in r.notes[-1]


def test_reconstruct_without_rate_is_an_input_error():
    m = measured(None, [10], [5], [0.1], [0.5], client={})
    with pytest.raises(InputError, match=r"m.json: request_rate: the log has neither per-request send times nor a "
                                         r"request rate \(fix: give request_rate=<req/s> \(or inf\) on the command line\)"):
        reconstruct(m)


def test_client_semaphore_hand_computed():
    # Limit 2: requests 0 and 1 go at once; 2 waits for the first completion (0 at t=1.0); 3 for the next
    # (1 at t=1.5); 4 is scheduled after every slot has freed up.
    send = client_send_times(np.array([0.0, 0.0, 0.0, 0.2, 5.0]), np.array([1.0, 1.5, 2.0, 1.0, 1.0]), 2)
    np.testing.assert_allclose(send, [0.0, 0.0, 1.0, 1.5, 5.0])


def test_compare_errors_throughput_and_load_by_hand():
    m = measured([0.0, 1.0, 2.0, 3.0], [100, 100, 100, 100], [11, 11, 11, 1],
                 [0.10, 0.20, 0.10, 0.40], [1.10, 1.20, 2.10, 0.40])
    rep = fake_replay([0.0, 1.0, 2.0, 3.0], [0.11, 0.22, 0.12, 0.50], [1.21, 1.08, 2.12, 0.50], m.output_tokens)
    block = compare(m, rep)
    assert block["compared"] == 4
    ttft = block["metrics"]["ttft_s"]["p50"]
    assert ttft["measured"] == pytest.approx(0.15) and ttft["simulated"] == pytest.approx(0.17)
    assert ttft["error_pct"] == pytest.approx(100 * 0.02 / 0.15)
    assert ttft["abs_error_pct"] == pytest.approx(abs(ttft["error_pct"]))
    # TPOT excludes the first token and the one-token request: measured [0.1, 0.1, 0.2], simulated [0.11, 0.086, 0.2]
    tpot_mean = block["metrics"]["tpot_s"]["mean"]
    assert tpot_mean["measured"] == pytest.approx(0.4 / 3) and tpot_mean["simulated"] == pytest.approx(0.396 / 3)
    per = block["per_request_error_pct"]["ttft_s"]  # +10, +10, +20, +25 %
    assert per["median_abs"] == pytest.approx(15.0) and per["mean"] == pytest.approx(16.25)
    th = block["throughput"]["requests_per_s"]
    assert th["measured"] == pytest.approx(4 / 4.1) and th["simulated"] == pytest.approx(4 / 4.12)
    loads = load_levels(m, rep)["measured_inflight"]
    np.testing.assert_array_equal(loads, [1, 2, 2, 2])  # request 0 (0-1.1 s) still in flight at 1.0, and so on
    assert sum(b["requests"] for b in block["by_load"]["measured_inflight"]) == 4


def test_compare_counts_requests_the_simulation_did_not_complete():
    m = measured([0.0, 1.0], [10, 10], [5, 5], [0.1, 0.1], [0.5, 0.5])
    rep = fake_replay([0.0, 1.0], [0.1, np.nan], [0.5, np.nan], m.output_tokens, ["completed", "unfinished"])
    block = compare(m, rep)
    assert block["compared"] == 1 and block["not_completed_in_sim"] == {"rejected": 0, "unfinished": 1}


def test_pct_error_of_zero_measured_is_nan():
    assert math.isnan(pct_error(1.0, 0.0)) and pct_error(1.1, 1.0) == pytest.approx(10.0)


def test_throughput_span_is_first_send_to_last_completion():
    th = throughput(np.array([1.0, 2.0]), np.array([1.0, 3.0]), np.array([10, 20]))
    assert th == {"requests_per_s": pytest.approx(0.5), "output_tokens_per_s": pytest.approx(7.5)}


def test_replay_applies_the_client_semaphore_when_send_times_were_reconstructed(tmp_path):
    from sim.validate.deployment import resolve
    from sim.validate.replay import replay
    from tests.validate.conftest import DEPLOYMENT

    n = 40
    m = measured(None, np.full(n, 300), np.full(n, 30), np.full(n, 0.1), np.full(n, 1.0),
                 client={"request_rate": math.inf, "max_concurrency": 4.0})
    m = reconstruct(m)
    run = resolve(m, DEPLOYMENT, tmp_path).run
    rep = replay(run, m, client_limit=4)
    assert rep.semaphore_rounds >= 1 and rep.completed.all()
    start, end = rep.send_s, rep.send_s + rep.e2e_s
    in_flight = [np.sum((start <= t) & (end > t + 1e-9)) for t in start]  # a slot freed at t is free at t
    assert max(in_flight) == 4  # the client cap, which the server never sees exceeded
    unlimited = replay(run, m)
    assert np.all(unlimited.send_s == 0.0) and np.nanmedian(unlimited.ttft_s) > np.nanmedian(rep.ttft_s)


def test_deployment_precedence_command_line_then_log_then_defaults(tmp_path):
    from sim.validate.deployment import resolve

    m = measured([0.0], [100], [10], [0.1], [0.5], deployment={
        "model_id": "meta-llama/Llama-3.1-8B-Instruct", "hardware": "a100_80gb", "tp": "1",
        "max_num_seqs": "64", "enable_chunked_prefill": "false", "max_model_len": "4096"})
    dep = resolve(m, ["scenario=smoke", "batching.max_num_seqs=32"], tmp_path)
    s = dep.sources
    assert s["model"] == {"value": "llama3_1_8b", "source": "log (model_id 'meta-llama/Llama-3.1-8B-Instruct' matched by hf_id)"}
    assert s["hardware"]["source"] == "log" and dep.run.pools["main"].hardware == "a100_80gb"
    assert s["max_num_seqs"] == {"value": 32, "source": "command line"}
    assert s["instances"] == {"value": 1, "source": "validation default (one server)"}
    assert s["max_model_len"] == {"value": 4096, "source": "log"}
    assert s["token_budget"]["value"] == 4096  # vLLM's default without chunked prefill
    assert s["kv_dtype"]["source"].startswith("assumed (not in the log)")
    assert (tmp_path / "models" / "llama3_1_8b_ctx4096.yaml").is_file()
