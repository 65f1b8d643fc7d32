"""The plan's closing report fits an 80-column terminal: no line longer, no name cut by an ellipsis, the verdict
first, then the answer (chosen, margins, next cheaper) and then the table."""
from __future__ import annotations

from sim.plan.console import print_plan

KEYS = ["scenario.pools.l40s_int4.min_instances", "scenario.pools.h200_fp8.instances", "batching.max_num_seqs"]


def _check(name, cls, target, achieved, met, unit="s"):
    return {"name": name, "class": cls, "target": target, "achieved": achieved, "unit": unit, "met": met}


def _config(i, l40s, h200, seqs, usd, tpot_s):
    met = tpot_s <= 0.05
    checks = [_check("ttft_p99", "product_qa", 2.0, 0.4183, True),
              _check("tpot_p99", "product_qa", 0.05, tpot_s, met),
              _check("served_fraction", "*", 0.9999, 0.99995, True, "fraction")]
    overrides = dict(zip(KEYS, (l40s, h200, seqs)))
    return {"id": i, "overrides": overrides, "override_args": [f"{k}={v}" for k, v in overrides.items()],
            "status": "completed", "meets_slos": met, "objective": usd, "usd_per_month_projected": usd * 1088.0,
            "ttft_p99_s": 0.4183, "tpot_p99_s": tpot_s, "served_fraction": 0.99995, "slos": checks,
            "failed_slos": [c for c in checks if not c["met"]], "cached": i % 2 == 0}


def _plan():
    configs = [_config(0, 16, 6, 256, 58.4412, 0.0507), _config(1, 20, 6, 256, 59.2514, 0.0342),
               _config(2, 32, 8, 1024, 61.0009, 0.0301)]
    return {"scenario": "ecommerce_peak", "objective": "usd",
            "search": [{"key": k, "values": [1, 2]} for k in KEYS],
            "frontier": {"ttft_p99_s": [1, 2], "tpot_p99_s": [2]}, "chosen": configs[1],
            "next_cheaper_failing": configs[0], "configurations": configs, "notes": [],
            "jobs": {"configurations": 3, "simulated": 2, "cached": 1, "invalid": 0, "backend": "process",
                     "workers": 2, "wall_time_s": 822.8}}


def test_the_report_fits_80_columns_and_opens_with_the_answer(capsys):
    print_plan(_plan(), "plans/ecommerce_peak/x/plan.json")
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(line for line in lines if len(line) > 80)
    assert "…" not in out
    assert lines[0] == "PASS"                       # the gate's verdict first (sim/results/gate.py)
    assert lines[1].startswith("chosen: #1")
    assert out.index("next cheaper, fails: #0") < out.index("inferplan plan · ecommerce_peak")
    assert "product_qa tpot_p99 0.0507 s vs target 0.05 s" in out
    for word in ("l40s_int4", "h200_fp8", "instances", "seqs", "← chosen", "frontier", "missed", " 99.995 "):
        assert word in out


def test_without_a_passing_configuration_the_first_line_is_fail_with_the_cheapest_misses(capsys):
    plan = _plan()
    plan["configurations"] = [c for c in plan["configurations"] if not c["meets_slos"]]
    plan["chosen"] = plan["next_cheaper_failing"] = None
    print_plan(plan, "plans/ecommerce_peak/x/plan.json")
    first = capsys.readouterr().out.splitlines()[0]
    assert first == ("FAIL: no configuration meets every SLO; the cheapest, #0 "
                     "(scenario.pools.l40s_int4.min_instances=16 scenario.pools.h200_fp8.instances=6 "
                     "batching.max_num_seqs=256), misses tpot_p99 product_qa 50.7 ms > 50 ms")


def test_the_monthly_projection_states_its_basis(capsys):
    plan = _plan()
    plan["chosen"]["usd_per_month_basis"] = "if this 10-minute window's fleet and traffic ran all 730 h of a month"
    print_plan(plan, "plans/ecommerce_peak/x/plan.json")
    out = " ".join(capsys.readouterr().out.split())
    assert "monthly projection: $64,466 (if this 10-minute window's fleet and traffic ran all 730 h of a month)" in out
