"""`python -m sim.validate.silicon.beyond`: what the measured TTFT holds beyond the simulated kernels, per engine,
collection and model, at light load, from a matrix run with no front-end time."""
from __future__ import annotations

import csv
import json

import pytest

from sim.validate.silicon.beyond import beyond, main
from sim.validate.silicon.clients import collection_of
from sim.validate.silicon.fit import KEYS
from sim.validate.silicon.runner import FIELDS

GAP = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_1024x128_c8_tp1_epnone_1"
INFERENCEX = "2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x1024_c4_tp4_ep4_987"


def _rec(rid: str, model: str, clients: int, measured_s: float, sim_s: float, prefill_s: float,
         tpot_error_pct: float = 0.0, frontend_s: float = 0.0) -> dict:
    overrides = " ".join(f"++engine.{k}={frontend_s if k == 'frontend_per_request_s' else 0.0}" for k in KEYS)
    return {**{k: "" for k in FIELDS}, "id": rid, "status": "simulated", "engine": "trtllm", "model": model,
            "system": "h100_sxm", "clients": clients, "measured_ttft_s": measured_s, "sim_ttft_p50_s": sim_s,
            "sim_prefill_alone_s": prefill_s, "measured_tpot_s": 0.02,
            "sim_tpot_p50_s": 0.02 * (1 + tpot_error_pct / 100), "tpot_error_pct": tpot_error_pct,
            "overrides": overrides}


def _write(path, recs):
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(recs)
    return path


def test_collection_of_a_source():
    assert collection_of("source_file=/x/aic-auto-gap-analysis/data/h100_sxm/trtllm/1.0.0rc3/Q.csv") == "gap-analysis"
    assert collection_of("source_file=2026-04-06.csv") == "inferencex"
    assert collection_of("") == "unrecorded"


def test_light_load_rows_summarised_per_engine_collection_and_model():
    """Rows at <= 8 clients with the decode in agreement: the medians of measured / simulated TTFT, of the TTFT in
    prefills and of the seconds beyond; a loaded row, one whose decode is off and one not simulated are left out."""
    recs = [_rec(GAP, "Qwen3-32B", 8, 0.30, 0.10, 0.08), _rec("g2", "Qwen3-32B", 4, 0.40, 0.10, 0.10),
            _rec("g3", "Qwen3-32B", 64, 9.0, 0.2, 0.08), _rec("g4", "Qwen3-32B", 4, 9.0, 0.1, 0.08, 80.0),
            _rec(INFERENCEX, "gpt-oss-120b", 4, 0.10, 0.05, 0.04), {**_rec("g5", "X", 1, 1, 1, 1), "status": "failed"}]
    collections = {GAP: "gap-analysis", "g2": "gap-analysis", "g3": "gap-analysis", "g4": "gap-analysis",
                   INFERENCEX: "inferencex"}
    out = beyond(recs, collections, 8)
    assert [(s["collection"], s["model"], s["rows"]) for s in out] == [("gap-analysis", "Qwen3-32B", 2),
                                                                       ("inferencex", "gpt-oss-120b", 1)]
    gap = out[0]
    assert gap["ttft_ratio"]["median"] == pytest.approx(3.5)  # 3.0 and 4.0
    assert gap["prefills"]["median"] == pytest.approx((0.30 / 0.08 + 4.0) / 2)
    assert gap["beyond_s"] == pytest.approx(0.25) and gap["tpot_ratio"] == pytest.approx(1.0)
    assert beyond(recs, collections, 64)[0]["rows"] == 3


def test_the_command_reads_a_matrix_without_front_end_time_and_refuses_one_with_it(tmp_path, capsys):
    base = _write(tmp_path / "rows.csv", [_rec(GAP, "Qwen3-32B", 8, 0.30, 0.10, 0.08),
                                          _rec(INFERENCEX, "gpt-oss-120b", 4, 0.10, 0.05, 0.04)])
    main([str(tmp_path), f"out={tmp_path / 'beyond.json'}"])
    text = capsys.readouterr().out
    assert "gap-analysis Qwen3-32B" in text and "inferencex   gpt-oss-120b" in text
    doc = json.loads((tmp_path / "beyond.json").read_text())
    assert doc["clients"] == 8 and [g["collection"] for g in doc["groups"]] == ["gap-analysis", "inferencex"]
    _write(base, [_rec(GAP, "Qwen3-32B", 8, 0.30, 0.10, 0.08, frontend_s=0.2)])
    for argv, message in (([str(base)], "overrides: rows simulated with front-end time"),
                          ([], "command line: rows: no matrix given"),
                          ([str(tmp_path / "none")], "no rows.csv there"),
                          ([str(tmp_path), "clients=0"], "clients: must be a whole number >= 1")):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and message in err and err.count("\n") == 1
