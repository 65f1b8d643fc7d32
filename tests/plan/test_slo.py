"""SLO checks and margins from a summary, per request class (hand-built summaries)."""
from __future__ import annotations

import pytest

from sim.plan.slo import meets_slos, slo_checks


def summary(ttft_batch_p99: float, served_batch: float) -> dict:
    def cls(ttft_p99, tpot_p99, ttft_target, tpot_target, served):
        return {"ttft_s": {"p99": ttft_p99}, "tpot_s": {"p99": tpot_p99}, "ttft_p99_s_target": ttft_target,
                "tpot_p99_s_target": tpot_target, "served": served,
                "met": {"ttft_p99": ttft_p99 <= ttft_target, "tpot_p99": tpot_p99 <= tpot_target,
                        "served_fraction": served >= 0.999}}
    classes = {"chat": cls(1.5, 0.04, 2.0, 0.05, 1.0), "batch": cls(ttft_batch_p99, 0.5, 3600.0, 1.0, served_batch)}
    served = (1.0 + served_batch) / 2
    return {"slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.05, "served_fraction": 0.999, "served": served,
                    "met": {"ttft_p99": all(c["met"]["ttft_p99"] for c in classes.values()),
                            "tpot_p99": True, "served_fraction": served >= 0.999},
                    "classes": classes}}


def test_margins_per_class_are_target_minus_achieved():
    checks = {(c.request_class, c.name): c for c in slo_checks(summary(100.0, 1.0))}
    assert len(checks) == 7                      # 3 per class + the fleet's served fraction
    chat = checks[("chat", "ttft_p99")]
    assert chat.met and chat.margin == pytest.approx(0.5) and chat.margin_pct == pytest.approx(25.0)
    batch = checks[("batch", "ttft_p99")]
    assert batch.margin == pytest.approx(3500.0)
    tpot = checks[("chat", "tpot_p99")]
    assert tpot.margin == pytest.approx(0.01) and tpot.margin_pct == pytest.approx(20.0)
    assert "chat ttft_p99 1.5 s vs target 2 s (+0.5 s, +25.0%)" == chat.describe()


def test_a_class_missing_its_target_fails_the_configuration():
    ok, late, dropped = summary(100.0, 1.0), summary(4000.0, 1.0), summary(100.0, 0.99)
    assert meets_slos(ok)
    assert not meets_slos(late)
    failed = [c for c in slo_checks(late) if not c.met]
    assert [(c.request_class, c.name) for c in failed] == [("batch", "ttft_p99")]
    assert failed[0].margin == pytest.approx(-400.0) and failed[0].margin_pct == pytest.approx(-400 / 36)
    assert not meets_slos(dropped)
    lost = {(c.request_class, c.name): c for c in slo_checks(dropped) if not c.met}
    assert set(lost) == {("batch", "served_fraction"), ("*", "served_fraction")}
    assert lost[("batch", "served_fraction")].margin == pytest.approx(0.99 - 0.999)


def test_no_summary_never_meets():
    assert not meets_slos(None) and not meets_slos({})
