"""The benchmark clients of the silicon matrix (sim/validate/silicon/clients.py): each row's lengths as its client
drew them, the client picked by the row's data source, and the `cost=`/`client=` options of the command line."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from inferplan.errors import InputError
from sim.api import scenario_workload
from sim.compose import compose_config
from sim.config import load_run_config
from sim.validate.silicon.__main__ import parse_args
from sim.validate.silicon.clients import client_of, traffic
from sim.validate.silicon.simulate_row import overrides
from sim.validate.silicon.support import plan_row
from sim.validate.silicon.table import CSV_PATH, read_table

GAP_ANALYSIS = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_sglang_agg_1024x512_c16_tp2_epnone_19"


@pytest.fixture(scope="module")
def rows():
    return {r.id: r for r in read_table(CSV_PATH)}


def test_source_column_picks_the_client(rows):
    gap = rows[GAP_ANALYSIS]
    assert "aic-auto-gap-analysis" in gap.source
    assert client_of(gap, "source") == "fixed"
    other = next(r for r in rows.values() if r.source and "aic-auto-gap-analysis" not in r.source)
    assert client_of(other, "source") == "inferencex"
    assert client_of(dataclasses.replace(gap, source=""), "source") == "inferencex"  # unknown source: the README's
    assert client_of(gap, "inferencex") == "inferencex" and client_of(other, "fixed") == "fixed"


def test_the_inferred_client_keeps_rounds_together_where_the_rows_tpot_says_so(rows):
    """`inferred` (the default): zero-spread lengths for the H100 SGLang gap-analysis rows (their TPOT is a round
    kept together's), InferenceX's client for the same collection's vLLM and TensorRT-LLM rows and for the rest."""
    assert client_of(rows[GAP_ANALYSIS], "inferred") == "fixed"
    gap_vllm = next(r for r in rows.values() if "aic-auto-gap-analysis" in r.source and r.engine == "vllm")
    assert client_of(gap_vllm, "inferred") == "inferencex" and client_of(gap_vllm, "source") == "fixed"
    other = next(r for r in rows.values() if r.source and "aic-auto-gap-analysis" not in r.source)
    assert client_of(other, "inferred") == "inferencex"


def test_lengths_of_each_client(rows):
    row = rows[GAP_ANALYSIS]
    fixed, ix = traffic(row, "fixed", 10), traffic(row, "inferencex", 10)
    assert fixed["clients"] == ix["clients"] == 16 and fixed["requests"] == ix["requests"] == 160
    assert fixed["lengths"]["prompt"] == {"kind": "uniform", "low_tokens": 1024, "high_tokens": 1024}
    assert fixed["lengths"]["output"] == {"kind": "uniform", "low_tokens": 512, "high_tokens": 512}
    assert ix["lengths"]["prompt"] == {"kind": "uniform", "low_tokens": 819, "high_tokens": 1024}
    assert ix["lengths"]["output"] == {"kind": "uniform", "low_tokens": 409, "high_tokens": 512}


def test_overrides_carry_cost_profile_and_client_lengths(rows):
    plan = plan_row(rows[GAP_ANALYSIS])
    ov = overrides(plan, rounds=2, cost="measured", client="source")
    assert "cost.profile=measured" in ov
    run = load_run_config(compose_config(ov))
    assert run.cost.profile == "measured"
    wl = scenario_workload(run)
    assert len(wl) == 32
    assert np.all(np.asarray(wl.prompt_tokens) == 1024) and np.all(np.asarray(wl.output_tokens) == 512)
    assert not any(o.startswith("cost.profile") for o in overrides(plan, rounds=2))


def test_command_line_options():
    opts = parse_args(["cost=measured", "client=source"])
    assert opts["cost"] == "measured" and opts["client"] == "source"
    default = parse_args([])
    assert default["cost"] is None and default["client"] == "inferred"
    with pytest.raises(InputError, match="client: must be one of inferred, inferencex, fixed, source"):
        parse_args(["client=burst"])
    with pytest.raises(InputError, match="cost: must be one of auto, measured, analytical or a profile file"):
        parse_args(["cost=fast"])


def test_matrix_records_the_client_and_profile(rows, tmp_path):
    from sim.validate.silicon.runner import run_matrix

    quick = rows["qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_1024x128_c8_tp1_epnone_1"]
    rec = run_matrix([quick], tmp_path, jobs=1, rounds=2, cost="analytical", client="source").records[0]
    assert rec["status"] == "simulated" and rec["client"] == "fixed" and rec["requests"] == 16
    assert rec["sim_ttft_round0_p50_s"] > 0 and rec["sim_ttft_later_p50_s"] > 0
    assert "cost.profile=analytical" in rec["overrides"]
    ov = rec["overrides"]
    assert "low_tokens:1024,high_tokens:1024" in ov and "low_tokens:128,high_tokens:128" in ov


def test_resume_keeps_an_older_rows_csv_header(rows, tmp_path):
    """A rows.csv written before a column was added is resumed in its own columns (no shifted values)."""
    import csv

    from sim.validate.silicon.runner import FIELDS, read_records, run_matrix

    quick = rows["qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_1024x128_c8_tp1_epnone_1"]
    old = [f for f in FIELDS if f not in ("client", "sim_ttft_round0_p50_s", "sim_ttft_later_p50_s")]
    with (tmp_path / "rows.csv").open("w", newline="") as fh:
        csv.DictWriter(fh, fieldnames=old).writeheader()
    run_matrix([quick], tmp_path, jobs=1, rounds=1, resume=True)
    (rec,) = read_records(tmp_path / "rows.csv")
    assert rec["id"] == quick.id and rec["status"] == "simulated" and rec["requests"] == 8
    assert rec["sim_ttft_p50_s"] > 0 and "client" not in rec


def test_fit_takes_the_same_options(capsys):
    from sim.validate.silicon.fit import main as fit_main

    with pytest.raises(SystemExit) as stop:
        fit_main(["per_model=1", "client=burst"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "client: must be one of inferred, inferencex, fixed, source" in err


def _rows_csv(path, cols: list[str], rows: list[list]):
    """A matrix rows.csv of `rows` in the columns `cols` (the fit reads the columns it needs)."""
    import csv

    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        w.writerows(rows)
    return path


def test_fit_recovers_a_per_prefill_stream_gap_for_the_engines_asked(tmp_path, capsys):
    """Rows whose measured TTFT is the simulated one plus 20 ms + (0.5 + 0.05 x streams) x the prefill alone: the fit
    of `engines=vllm` finds those coefficients and reports no other engine."""
    import json

    from sim.validate.silicon.fit import main as fit_main

    cols = ["id", "status", "engine", "model", "system", "preset", "isl_tokens", "clients", "sim_prefill_alone_s",
            "sim_ttft_p50_s", "measured_ttft_s"]
    rows = []
    for i, (engine, model) in enumerate([("vllm", "A"), ("vllm", "B"), ("sglang", "A")] * 12):
        clients, prefill_s, sim_s = 1 + 9 * (i % 6), 0.02 + 0.01 * (i % 5), 0.05 + 0.01 * (i % 7)
        meas = sim_s + 0.02 + (0.5 + 0.05 * (clients - 1)) * prefill_s
        rows.append([f"r{i}", "simulated", engine, model, "h100_sxm", "x", 1024, clients, prefill_s, sim_s, meas])
    path = _rows_csv(tmp_path / "rows.csv", cols, rows)
    terms = "frontend_per_request_s,frontend_per_stream_s,frontend_per_prefill_s,frontend_per_prefill_stream_s"
    fit_main([f"base={path}", "engines=vllm", f"terms={terms}"])
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["engines"]) == ["vllm"]
    assert doc["engines"]["vllm"]["terms"] == ["frontend_per_request_s", "frontend_per_stream_s",
                                               "frontend_per_prefill_s", "frontend_per_prefill_stream_s"]
    assert list(doc["engines"]["vllm"]["presets"]) == ["x"]
    v = doc["engines"]["vllm"]["presets"]["x"]["values"]
    assert v["frontend_per_request_s"] == pytest.approx(0.02, rel=1e-3)
    assert v["frontend_per_prefill_s"] == pytest.approx(0.5, rel=1e-3)
    assert v["frontend_per_prefill_stream_s"] == pytest.approx(0.05, rel=1e-3)
    assert v["frontend_per_stream_s"] == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(SystemExit) as stop:
        fit_main([f"base={path}", "engines=tgi"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "command line: engines: tgi unknown" in err and err.count("\n") == 1


def test_the_vllm_fit_counts_tokens_prefills_per_stream_and_iterations_by_default(tmp_path, capsys):
    """Rows whose measured TTFT is the simulated one plus 16 us per mean prompt token, 0.05 x the prompt's prefill
    alone per other client's stream and 2 simulated TPOTs: vLLM's default terms (`fit.FITTED`) are those and find
    1.6e-05, 0.05 and 2; TensorRT-LLM's are per-prefill ones, SGLang's per request, stream and iteration per prompt
    token; a term that is not a front-end key is one line, exit 2."""
    import json

    from sim.validate.silicon.fit import FITTED, KEYS
    from sim.validate.silicon.fit import main as fit_main

    assert [KEYS[i] for i in FITTED["vllm"]] == ["frontend_per_prompt_token_s", "frontend_per_prefill_stream_s",
                                                 "frontend_per_step"]
    assert [KEYS[i] for i in FITTED["sglang"]] == ["frontend_per_request_s", "frontend_per_stream_s",
                                                   "frontend_per_step_token"]
    assert [KEYS[i] for i in FITTED["trtllm"]] == ["frontend_per_prefill_s", "frontend_per_prefill_stream_s"]
    cols = ["id", "status", "engine", "model", "system", "preset", "isl_tokens", "clients", "sim_prefill_alone_s",
            "sim_ttft_p50_s", "sim_tpot_p50_s", "measured_ttft_s"]
    rows = []
    for i, model in enumerate(["A", "B", "C"] * 12):
        isl, tpot_s, sim_s = (1024, 4096, 8192)[i % 3], 0.005 + 0.004 * (i % 5), 0.05 + 0.01 * (i % 7)
        clients, prefill_s = (4, 16, 32, 64)[(i // 3) % 4], 0.02 + 0.01 * (i % 4)
        meas = sim_s + 1.6e-05 * 0.9 * isl + 0.05 * prefill_s * (clients - 1) + 2.0 * tpot_s
        rows.append([f"r{i}", "simulated", "vllm", model, "h100_sxm", "x", isl, clients, prefill_s, sim_s, tpot_s,
                     meas])
    path = _rows_csv(tmp_path / "rows.csv", cols, rows)
    fit_main([f"base={path}"])
    v = json.loads(capsys.readouterr().out)["engines"]["vllm"]["presets"]["x"]["values"]
    assert v["frontend_per_prompt_token_s"] == pytest.approx(1.6e-05, rel=1e-3)
    assert v["frontend_per_prefill_stream_s"] == pytest.approx(0.05, rel=1e-3)
    assert v["frontend_per_step"] == pytest.approx(2.0, rel=1e-3)
    assert v["frontend_per_step_token"] == 0.0
    assert v["frontend_per_prefill_s"] == 0.0 and v["frontend_per_request_s"] == 0.0
    with pytest.raises(SystemExit) as stop:
        fit_main([f"base={path}", "terms=frontend_per_step,per_token"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "terms: per_token is not a front-end key" in err and err.count("\n") == 1


def test_each_serving_preset_is_fitted_on_its_own_rows_and_a_lone_model_held_out_on_the_others(tmp_path, capsys):
    """Two presets of one engine whose rows carry different delays (old: 0.05 s per request; new: 0.25 s): each
    preset's fit finds its own; a model is held out on its preset's other models (`fitted_on: preset`), and the
    model alone in its preset on the engine's other presets' rows (`fitted_on: engine`); a model whose rows in a
    preset are all left out of the fit (decode off) still gets held-out coefficients, so the matrix can score it."""
    import json

    from sim.validate.silicon.fit import main as fit_main

    cols = ["id", "status", "engine", "model", "system", "preset", "isl_tokens", "clients", "sim_prefill_alone_s",
            "sim_ttft_p50_s", "measured_ttft_s", "tpot_error_pct"]
    rows = [[f"r{i}", "simulated", "sglang", model, "h200_sxm", preset, 1024, 4, 0.03, 0.05 + 0.01 * (i % 7),
             0.05 + 0.01 * (i % 7) + delay_s, 0.0]
            for i, (preset, model, delay_s) in enumerate([("old", "A", 0.05), ("new", "B", 0.25),
                                                         ("new", "C", 0.25)] * 6)]
    rows.append(["d", "simulated", "sglang", "D", "h200_sxm", "old", 1024, 512, 0.03, 0.1, 0.5, 80.0])
    path = _rows_csv(tmp_path / "rows.csv", cols, rows)
    fit_main([f"base={path}", "terms=frontend_per_request_s"])
    fits = json.loads(capsys.readouterr().out)["engines"]["sglang"]
    assert sorted(fits["presets"]) == ["new", "old"] and fits["models"] == ["A", "B", "C"]
    assert fits["presets"]["old"]["held_out_each"]["D"] == {"rows": 0, "fitted_on": "preset",
                                                          **fits["presets"]["old"]["values"]}
    new, old = fits["presets"]["new"], fits["presets"]["old"]
    assert new["values"]["frontend_per_request_s"] == pytest.approx(0.25, rel=1e-6)
    assert old["values"]["frontend_per_request_s"] == pytest.approx(0.05, rel=1e-6)
    assert new["held_out_each"]["B"]["fitted_on"] == "preset" and new["models"] == ["B", "C"]
    assert new["held_out_each"]["B"]["frontend_per_request_s"] == pytest.approx(0.25, rel=1e-6)
    assert new["held_out_each"]["B"]["median_abs_pct"] == pytest.approx(0.0, abs=1e-6)
    assert old["held_out_each"]["A"]["fitted_on"] == "engine"
    assert old["held_out_each"]["A"]["frontend_per_request_s"] == pytest.approx(0.25, rel=1e-6)
    assert fits["in_sample"]["median_abs_pct"] == 0.0 and fits["held_out"]["rows"] == 18


def test_the_fit_of_the_same_rows_in_another_order_is_the_same_bit_for_bit():
    """A matrix writes its rows as they finish (jobs > 1: in a varying order); the fit sorts them first, so the
    same rows give the same coefficients exactly."""
    import random

    from sim.validate.silicon.fit import FITTED, fit_engine

    rows = []
    for i, model in enumerate(["A", "B", "C"] * 20):
        isl, tpot_s, sim_s = (1024, 4096, 8192)[i % 3], 0.005 + 0.0041 * (i % 7), 0.05 + 0.013 * (i % 11)
        clients, prefill_s = (4, 16, 32, 64)[(i // 3) % 4], 0.02 + 0.017 * (i % 5)
        rows.append({"id": f"r{i}", "model": model, "preset": "x", "isl_tokens": isl, "clients": clients,
                     "sim_prefill_alone_s": prefill_s, "sim_ttft_p50_s": sim_s, "sim_tpot_p50_s": tpot_s,
                     "measured_ttft_s": sim_s * (1.7 + 0.31 * (i % 13) / 13) + 1.3e-05 * isl})
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    assert fit_engine(shuffled, FITTED["vllm"]) == fit_engine(rows, FITTED["vllm"])
