"""What a partition beyond the TTFT limit shows in its rows (misses.py), on hand-made records (no simulation)."""
from __future__ import annotations

from sim.validate.silicon.misses import diagnose, lines


def rec(i: str, clients: int, measured: float, simulated: float, ttft_err: float, tpot_err: float = 0.0,
        shape: str = "1024x8192", tp: int = 8, prefill: float = 0.1) -> dict:
    return {"id": i, "status": "simulated", "system": "h200_sxm", "engine": "sglang", "model": "GLM-5", "shape": shape,
            "mode": "agg", "tp": tp, "deployment": "{}", "engine_version": "0.5.9", "preset": "sglang_v059_serve",
            "clients": clients, "measured_ttft_s": measured, "sim_ttft_p50_s": simulated,
            "sim_prefill_alone_s": prefill, "ttft_error_pct": ttft_err, "tpot_error_pct": tpot_err}


ROWS = [rec("a4", 4, 0.40, 0.60, +50.0, tpot_err=60.0),   # decode off
        rec("a8", 8, 0.30, 0.48, +60.0),                  # measured TTFT falls from 0.40 s at 4 clients
        rec("a8twin", 8, 0.30, 0.48, +60.0),              # the same run recorded twice: the same evidence once
        rec("a16", 16, 0.50, 0.45, -10.0),
        rec("a64", 64, 20.0, 1.0, -95.0),                 # queued: beyond 10 prefills (1 s) and twice simulated
        rec("b4", 4, 0.2, 0.3, +50.0, shape="8192x1024"),
        rec("b8", 8, 0.3, 0.45, +50.0, shape="8192x1024"),
        rec("b16", 16, 0.4, 0.41, +2.5, shape="8192x1024"),
        rec("x", 4, 0.2, 0.1, -50.0, shape="1024x1024") | {"status": "unsupported"}]


def test_a_partitions_signs_are_read_from_its_rows():
    a, b = diagnose(ROWS, ["h200_sxm sglang GLM-5 1024x8192", "h200_sxm sglang GLM-5 8192x1024"], 30.0)
    assert a["rows"] == 5 and a["decode_off"] == 1
    assert a["queued"] == [{"clients": 64, "measured_ttft_s": 20.0, "simulated_ttft_s": 1.0, "prefills": 200.0}]
    assert a["falls_with_clients"] == [{"clients": [4, 8], "measured_ttft_s": [0.40, 0.30]}]
    assert a["beyond_limit"] == 4 and a["beyond_limit_with_a_sign"] == 4   # a4 (decode), a8 and its twin, a64
    # rows that queue in the simulation too (within twice its TTFT) are not the server's own queueing
    assert b["queued"] == [] and b["falls_with_clients"] == [] and b["decode_off"] == 0
    assert b["beyond_limit"] == 2 and b["beyond_limit_with_a_sign"] == 0


def test_the_lines_say_when_the_signs_do_not_explain_the_partition():
    a, b = lines(diagnose(ROWS, ["h200_sxm sglang GLM-5 1024x8192", "h200_sxm sglang GLM-5 8192x1024"], 30.0))
    assert "4 of its 4 rows beyond the limit show a sign;" in a and "model's error" not in a
    assert "20 s measured, 1 s simulated" in a and "0.4 s at 4 -> 0.3 s at 8" in a and "TPOT off" in a
    assert "0 of its 2 rows beyond the limit show a sign: the rest is the model's error" in b
    # a higher client count whose TTFT did not fall by more than 10% is no sign
    c = diagnose([rec("c4", 4, 1.0, 1.5, 50.0), rec("c8", 8, 0.95, 1.5, 58.0)], ["h200_sxm sglang GLM-5 1024x8192"],
                 30.0)[0]
    assert c["falls_with_clients"] == [] and c["beyond_limit_with_a_sign"] == 0
