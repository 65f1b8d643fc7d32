"""Parameter recovery: logs the simulator produced under known residual parameters (plus 3% measurement noise),
written in each format, are fitted back; the reported error is computed on held-out requests only.

Tolerances (from the recovery runs described in docs/validation.md "How well the fit recovers"), with send
times from the log (table, vLLM V26): step overhead within 1.5 ms and the GEMM scale within 6% (well
identified); the front-end delay within 8 ms (it trades off against the overhead of the prefill iteration); the
attention scale within 25% (in steady decode it trades off against the overhead almost exactly, and the fit's
weak prior holds it near 1.0); held-out P50/P90 of TTFT and TPOT within 10%. With reconstructed send times
(SGLang) the replay runs a different random arrival sequence from the one measured, so the same 150 requests
pin the parameters down less: GEMM scale within 15%, held-out P50s within 20%. (With the A100 GEMM and
prefill-attention forms of conf/cost/generations/ampere.yaml the SGLang case lands at TTFT P50 -19%, front end 9 ms:
close to its bounds, because at the true parameters the reconstructed arrivals queue less than the measured ones
and the fitted front-end delay absorbs the difference; docs/validation.md.)
"""
from __future__ import annotations

import numpy as np
import pytest

from sim.validate.arrivals import reconstruct
from sim.validate.compare import compare
from sim.validate.deployment import resolve
from sim.validate.fit import fit, train_mask
from sim.validate.formats import read_measured
from sim.validate.replay import replay
from sim.validate.synthetic import write_sglang, write_table, write_vllm
from tests.validate.conftest import DEPLOYMENT, TRUTH

WRITERS = {"table": lambda log, d: write_table(log, d / "log.csv"),
           "vllm": lambda log, d: write_vllm(log, d / "log.json", failed_after=40),
           "sglang": lambda log, d: write_sglang(log, d / "log.jsonl", failed_after=40)}


def fitted(tmp_path, log, fmt: str, deployment=DEPLOYMENT):
    m = reconstruct(read_measured(WRITERS[fmt](log, tmp_path)))
    dep = resolve(m, deployment, tmp_path)
    train = train_mask(len(m), 0.3, 0)
    return m, dep, train, fit(dep.run, m, train, max_simulations=40)


# format -> (GEMM scale relative tolerance, held-out percentile bound %, percentiles held to it, front-end s).
# SGLang's log has no arrival times: they are reconstructed, so the front-end delay is confounded with queueing
# (its recovered value moved from under 8 ms to 9.0 ms when the Ampere prefill-attention form was refitted).
TOLERANCE = {"table": (0.06, 10.0, ("p50", "p90"), 8e-3), "vllm": (0.06, 10.0, ("p50", "p90"), 8e-3),
             "sglang": (0.15, 20.0, ("p50",), 12e-3)}


@pytest.mark.parametrize("fmt", ["table", "vllm", "sglang"])
def test_recovers_known_parameters(tmp_path, truth_log, fmt):
    gemm_rel, bound_pct, stats, frontend_s = TOLERANCE[fmt]
    m, dep, train, result = fitted(tmp_path, truth_log, fmt)
    p = result.params
    assert m.arrival_source == ("reconstructed" if fmt == "sglang" else "log")
    assert abs(p.step_overhead_s - TRUTH.step_overhead_s) < 1.5e-3
    assert p.scale["gemm"] == pytest.approx(TRUTH.scale["gemm"], rel=gemm_rel)
    assert abs(p.frontend_overhead_s - TRUTH.frontend_overhead_s) < frontend_s
    assert p.scale["attention"] == pytest.approx(TRUTH.scale["attention"], rel=0.25)
    assert result.loss_final < 0.1 * result.loss_initial
    # With the fitted overlay the held-out percentiles are close; before the fit they were 20-35% off.
    held = compare(m, replay(p.apply(dep.run), m), ~train, with_throughput=False)
    before = compare(m, replay(dep.run, m), ~train, with_throughput=False)
    for metric in ("ttft_s", "tpot_s"):
        for stat in stats:
            assert abs(held["metrics"][metric][stat]["error_pct"]) < bound_pct, (metric, stat)
            assert abs(before["metrics"][metric][stat]["error_pct"]) > 15.0, (metric, stat)


def test_fit_never_reads_held_out_requests(tmp_path, truth_log):
    m, dep, train, result = fitted(tmp_path, truth_log, "table")
    spoiled = m.with_(ttft_s=np.where(train, m.ttft_s, m.ttft_s * 5), tpot_s=np.where(train, m.tpot_s, m.tpot_s * 5),
                      e2e_s=np.where(train, m.e2e_s, m.e2e_s * 5))
    again = fit(dep.run, spoiled, train, max_simulations=40)
    assert again.params == result.params and again.loss_final == result.loss_final


def test_held_out_report_reads_held_out_rows_only(truth_log, tmp_path):
    m = read_measured(write_table(truth_log, tmp_path / "log.csv"))
    dep = resolve(m, DEPLOYMENT, tmp_path)
    train = train_mask(len(m), 0.3, 0)
    rep = replay(TRUTH.apply(dep.run), m)
    held = compare(m, rep, ~train, with_throughput=False)
    spoiled = m.with_(ttft_s=np.where(train, 99.0, m.ttft_s))
    assert compare(spoiled, rep, ~train, with_throughput=False) == held
    assert held["requests"] == int((~train).sum()) == round(0.3 * len(m))


def test_split_is_deterministic_and_interleaved():
    a, b = train_mask(1000, 0.3, 0), train_mask(1000, 0.3, 0)
    np.testing.assert_array_equal(a, b)
    assert (~a).sum() == 300
    assert 0.2 < (~a[:500]).mean() < 0.4 and 0.2 < (~a[500:]).mean() < 0.4
    assert not np.array_equal(a, train_mask(1000, 0.3, 1))


def test_short_contexts_leave_the_attention_scale_weakly_identified(tmp_path):
    # 64-token prompts, 24-token outputs: attention is a few % of an iteration, so +25% on its scale moves the
    # percentiles by well under the 3% threshold (1.3% with the A100 GEMM form, which prices these small GEMMs
    # faster than the scalar default did), while overhead and GEMM scale stay pinned down.
    from sim.validate.synthetic import make_log, truth_run

    # (the analytical pricing, whose attention share at these lengths the numbers below describe; on the measured
    # A100 grid attention is a larger share of these small iterations and its scale is identified)
    analytical = [*DEPLOYMENT, "cost.profile=analytical"]
    log = make_log(truth_run(analytical, TRUTH), n=100, rate_per_s=2.0, seed=5, prompt_median=64, output_median=24)
    _, _, _, result = fitted(tmp_path, log, "table", analytical)
    assert result.weakly_identified == ["efficiency_scale.attention"]
    assert result.effect_pct["efficiency_scale.attention"] < 2.0 < 3.0 < result.effect_pct["step_overhead_s"]
    assert abs(result.params.step_overhead_s - TRUTH.step_overhead_s) < 1e-3
    # within the 6% of the main recovery test: the A100 GEMM form's per-GEMM launch term (4.9 us, not scaled)
    # trades a little GEMM time against the step overhead at these small batches (0.834 measured, 2026-12-02)
    assert result.params.scale["gemm"] == pytest.approx(0.8, rel=0.06)
