"""Verdict records: per class x pool, the aggregate rows, no data, and agreement with `slo.met`."""
import math

import numpy as np
import pytest

from inferplan.labels import Labels
from inferplan.config.run import ClassTarget, SloConfig
from sim.review.verdict import missed, verdicts


def _cols(rows):
    """rows: (class, pool, status, ttft_s, tpot_s)"""
    c = {k: Labels.of([r[i] for r in rows]) for i, k in enumerate(("request_class", "pool", "status"))}
    c["ttft_s"] = np.array([r[3] for r in rows], dtype=float)
    c["tpot_s"] = np.array([r[4] for r in rows], dtype=float)
    return c


SLO = SloConfig(ttft_p99_s=1.0, tpot_p99_s=0.05, served_fraction=0.9, classes=(ClassTarget("batch", 100.0, 1.0),))


def _find(recs, slo, cls, pool):
    (r,) = [r for r in recs if (r["slo"], r["class"], r["pool"]) == (slo, cls, pool)]
    return r


def test_one_record_per_slo_class_pool_with_p99_of_that_cell():
    # qa on pool a: TPOT 0.01 x 9 + 0.2 x 1 -> P99 at rank 0.99 * 9 = 8.91 (numpy linear): 0.01 + 0.91 * 0.19 = 0.1829
    rows = [("qa", "a", "completed", 0.1, 0.01)] * 9 + [("qa", "a", "completed", 0.1, 0.2)]
    rows += [("qa", "b", "completed", 0.2, 0.02)] * 10 + [("batch", "b", "completed", 50.0, 0.5)] * 4
    recs = verdicts(_cols(rows), SLO)
    r = _find(recs, "tpot_p99", "qa", "a")
    assert r["achieved"] == pytest.approx(0.1829) and r["target"] == 0.05 and r["status"] == "missed"
    assert r["requests"] == 10
    assert _find(recs, "tpot_p99", "qa", "b")["status"] == "met"
    assert _find(recs, "ttft_p99", "batch", "b") == {"slo": "ttft_p99", "class": "batch", "pool": "b", "target": 100.0,
                                                      "achieved": 50.0, "requests": 4, "status": "met"}
    # no cell for a (class, pool) pair with no request
    assert not [r for r in recs if r["class"] == "batch" and r["pool"] == "a"]
    # the aggregate over classes on pool b is bound by the class nearest its target (batch TTFT 50/100 = 0.5 is
    # nearer than qa's 0.2/1.0), and every class there met
    agg = _find(recs, "ttft_p99", "all", "b")
    assert (agg["status"], agg["binding_class"], agg["achieved"], agg["requests"]) == ("met", "batch", 50.0, 14)
    whole = _find(recs, "tpot_p99", "all", "all")
    assert whole["status"] == "missed" and whole["binding_class"] == "qa"
    assert [(r["class"], r["pool"]) for r in missed(recs)] == [("qa", "a")]


def test_no_completed_request_is_no_data_never_a_pass_and_unplaced_rejects_count_only_in_all_pools():
    rows = [("qa", "a", "completed", 0.1, 0.01)] * 9 + [("qa", "", "rejected", math.nan, math.nan)]
    rows += [("chat", "a", "unfinished", math.nan, math.nan)]
    recs = verdicts(_cols(rows), SLO)
    assert _find(recs, "served_fraction", "qa", "a")["achieved"] == 1.0
    assert _find(recs, "served_fraction", "qa", "all")["achieved"] == pytest.approx(0.9)
    assert _find(recs, "served_fraction", "qa", "all")["status"] == "met"  # 0.9 >= 0.9
    chat = _find(recs, "ttft_p99", "chat", "a")
    assert chat["status"] == "no_data" and chat["achieved"] != chat["achieved"]
    assert _find(recs, "served_fraction", "chat", "a")["status"] == "missed"  # 0 of 1 served
    assert _find(recs, "ttft_p99", "all", "a")["status"] == "no_data"
    assert _find(recs, "served_fraction", "all", "all")["status"] == "missed"


def test_the_run_wide_rows_agree_with_the_summary_verdicts():
    from tests.sim.helpers import poisson_workload, run_config
    from sim.simulate import simulate

    run = run_config("scenario.slo.tpot_p99_s=0.005")
    s = simulate(run, poisson_workload(300, 20.0, 1)).summary
    for slo in ("ttft_p99", "tpot_p99"):
        row = _find(s["verdict"], slo, "all", "all")
        assert {"met": True, "missed": False, "no_data": None}[row["status"]] == s["slo"]["met"][slo]
        assert row["achieved"] == pytest.approx(s["latency_s"][slo[:4]]["p99"])
    assert _find(s["verdict"], "tpot_p99", "all", "all")["status"] == "missed"
    assert s["diagnosis"] and s["diagnosis"][0]["slo"] == "tpot_p99"
    # Every decode misses 5 ms, also those that met no prefill, at fewer than 8 running per instance: neither
    # large batches nor prefill interference explains it, so no cause is named
    assert s["diagnosis"][0]["cause"] == "undiagnosed" and s["diagnosis"][0]["try"] == []
    assert s["diagnosis"][0]["evidence"]["tpot_p50_s_without_prefill"] > 0.005
