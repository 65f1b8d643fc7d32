"""`held_out=<fit.json>` (sim/validate/silicon/held_out.py): each row simulated with the front-end time its engine's
fit found without the row's own model, the matrix the issue's targets are scored on."""
from __future__ import annotations

import csv
import json

import pytest

from inferplan.errors import InputError
from sim.validate.silicon.__main__ import main
from sim.validate.silicon.fit import KEYS as FIT_KEYS
from sim.validate.silicon.held_out import HeldOut
from sim.validate.silicon.table import CSV_PATH, read_table

ROW = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_1024x128_c8_tp1_epnone_1"
KEYS = {"frontend_per_request_s": 0.5, "frontend_per_prompt_token_s": 0.0, "frontend_per_stream_s": 0.0,
        "frontend_per_prefill_s": 0.0, "frontend_per_prefill_stream_s": 0.0}


def _doc(tmp_path, without_qwen: dict, by: str = "model") -> str:
    doc = {"engines": {"trtllm": {"held_out_by": by, "values": dict(KEYS, frontend_per_request_s=0.0),
                                  "held_out_each": {"Qwen3-32B": {"rows": 3, **without_qwen},
                                                    "gpt-oss-120b": {"rows": 2, **KEYS}}}}}
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_row_takes_the_coefficients_fitted_without_its_model(tmp_path):
    rows = {r.id: r for r in read_table(CSV_PATH)}
    held = HeldOut(_doc(tmp_path, KEYS))
    assert held.engine_keys(rows[ROW]) == dict.fromkeys(FIT_KEYS, 0.0) | KEYS  # (keys a document lacks: 0)
    vllm_row = next(r for r in rows.values() if r.engine == "vllm")
    assert held.engine_keys(vllm_row) is None  # an engine the document does not fit keeps its preset


def test_the_matrix_runs_each_row_with_its_held_out_front_end(tmp_path, capsys):
    """A 0.5 s per-request front end fitted without Qwen3-32B: the row's simulated TTFT carries it."""
    out = tmp_path / "out"
    main([f"ids={ROW}", f"held_out={_doc(tmp_path, KEYS)}", f"out={out}"])
    rec = next(csv.DictReader((out / "rows.csv").open()))
    assert "engine.frontend_per_request_s=0.5" in rec["overrides"]
    assert float(rec["sim_ttft_p50_s"]) > 0.5
    assert json.loads((out / "matrix.json").read_text())["options"]["held_out"].endswith("fit.json")
    assert "held out: each row's front-end time fitted without its own model" in capsys.readouterr().out
    assert "held out:" in (out / "report.txt").read_text()


@pytest.mark.parametrize("content,message", [
    (None, "held_out: cannot read it"),
    ("{", "held_out: not JSON"),
    ('{"engines": {}}', "engines: no engine fits in it"),
    ('{"engines": {"trtllm": {"values": {}}}}', "engines.trtllm.held_out_each: missing"),
])
def test_a_bad_fit_document_is_one_line_and_exit_2(content, message, tmp_path, capsys):
    path = tmp_path / "fit.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as stop:
        main([f"ids={ROW}", f"held_out={path}", f"out={tmp_path / 'out'}"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_model_the_fit_never_held_out_is_refused(tmp_path, capsys):
    path = tmp_path / "fit.json"
    only = {"held_out_by": "model", "held_out_each": {"gpt-oss-120b": KEYS}}
    path.write_text(json.dumps({"engines": {"trtllm": only}}))
    with pytest.raises(SystemExit) as stop:
        main([f"ids={ROW}", f"held_out={path}", f"out={tmp_path / 'out'}"])
    assert stop.value.code == 2 and "no coefficients fitted without 'Qwen3-32B'" in capsys.readouterr().err


def test_several_documents_score_together_each_engine_from_the_one_that_fits_it(tmp_path):
    """`held_out=a.json,b.json`: TensorRT-LLM's rows from the document that fits it, vLLM's from the other; the same
    engine in two documents is refused in one line."""
    rows = {r.id: r for r in read_table(CSV_PATH)}
    trt = _doc(tmp_path, KEYS)
    vllm_row = next(r for r in rows.values() if r.engine == "vllm" and r.model == "Qwen3-32B")
    steps = {"frontend_per_step": 4.0, "frontend_per_step_token": 0.002}
    other = tmp_path / "vllm.json"
    other.write_text(json.dumps({"engines": {"vllm": {"held_out_by": "model", "values": steps,
                                                      "held_out_each": {"Qwen3-32B": {"rows": 9, **steps}}}}}))
    held = HeldOut(f"{trt},{other}")
    assert held.engine_keys(rows[ROW]) == dict.fromkeys(FIT_KEYS, 0.0) | KEYS
    assert held.engine_keys(vllm_row) == dict.fromkeys(FIT_KEYS, 0.0) | steps
    with pytest.raises(InputError, match="engines.trtllm: also fitted in"):
        HeldOut([trt, trt])


def test_frontend_none_runs_the_base_the_fit_reads_and_the_fit_refuses_to_refine_it(tmp_path, capsys):
    """`frontend=none`: every front-end key at zero (the fitted TensorRT-LLM preset's delay gone from the row's
    simulated TTFT), recorded in matrix.json; `fit base=<it> refine=true` has no delay to take out and says so."""
    from sim.validate.silicon.fit import main as fit_main

    shipped, bare = tmp_path / "shipped", tmp_path / "bare"
    main([f"ids={ROW}", f"out={shipped}"])
    main([f"ids={ROW}", "frontend=none", f"out={bare}"])
    with_delay, without = (next(csv.DictReader((d / "rows.csv").open())) for d in (shipped, bare))
    assert all(f"engine.{k}=0.0" in without["overrides"] for k in FIT_KEYS)
    assert float(without["sim_ttft_p50_s"]) < float(with_delay["sim_ttft_p50_s"])
    assert without["sim_tpot_p50_s"] and json.loads((bare / "matrix.json").read_text())["options"]["frontend"] == "none"
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        fit_main([f"base={bare / 'rows.csv'}", "refine=true", "engines=trtllm"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "ran with no front-end time (frontend=none)" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv,message", [
    (["frontend=zero"], "command line: frontend: must be one of preset, none, got 'zero'"),
    (["frontend=none", "held_out=a.json"], "command line: frontend: frontend=none and held_out= both set"),
])
def test_a_bad_frontend_option_is_one_line_and_exit_2(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main([f"ids={ROW}", *argv, f"out={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith(f"error: {message}") and err.count("\n") == 1


def test_a_row_takes_the_held_out_coefficients_of_the_serving_preset_it_runs_with(tmp_path):
    """One fit per serving preset: an SGLang 0.5.1 row (sglang_v05_serve) and a 0.5.9 one (sglang_v059_serve) each
    take their preset's coefficients fitted without their model; a preset the document lacks is one line."""
    rows = {r.id: r for r in read_table(CSV_PATH)}
    old = next(r for r in rows.values() if r.engine == "sglang" and r.engine_version == "0.5.1.post1")
    new = next(r for r in rows.values() if r.engine == "sglang" and r.engine_version == "0.5.9"
               and r.system == "h200_sxm")
    slow, fast = dict(KEYS, frontend_per_request_s=0.25), dict(KEYS, frontend_per_request_s=0.05)
    presets = {"sglang_v05_serve": {"held_out_each": {old.model: fast}},
               "sglang_v059_serve": {"held_out_each": {new.model: slow}}}
    path = tmp_path / "fit.json"
    path.write_text(json.dumps({"engines": {"sglang": {"held_out_by": "model", "presets": presets}}}))
    held = HeldOut(path)
    assert held.engine_keys(old)["frontend_per_request_s"] == 0.05
    assert held.engine_keys(new)["frontend_per_request_s"] == 0.25
    path.write_text(json.dumps({"engines": {"sglang": {"held_out_by": "model",
                                                       "presets": {"sglang_v05_serve": presets["sglang_v05_serve"]}}}}))
    with pytest.raises(InputError, match="no fit of the preset 'sglang_v059_serve'"):
        HeldOut(path).engine_keys(new)
