"""`python -m sim.validate.silicon` on a few shipped rows: output files, report text, rows it cannot express counted
by reason, a failing row kept as a record, and an interrupted run keeping what finished."""
from __future__ import annotations

import csv
import dataclasses
import json

import pytest

from dashboard.calibration import load_matrix, matrix_folders
from sim.validate.silicon.__main__ import main
from sim.validate.silicon.runner import run_matrix
from sim.validate.silicon.table import CSV_PATH, read_table

SIMULATED = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_1024x128_c8_tp1_epnone_1"
FP4 = "kimik2_5_b200_vllm_fp4_agg_1024x1024_c4_cfg636"  # NVFP4 Kimi-K2.5 (moved to an H100: no NVFP4 kernel)
ARCHITECTURE = "qwen3_5_b300_sglang_fp4_agg_1024x1024_c8_cfg736"  # B300: edited to an H200 row of gpt-oss-20b
# (an architecture without a conf/model yaml)


def _subset(path, ids, edits=None, moved=None):
    """A copy of the shipped table with the rows `ids`, `moved[id]` ({column: value}) changing a row itself;
    `edits[id]` adds an edited copy of a row (its id suffixed `_edited`)."""
    with CSV_PATH.open(newline="") as fh:
        reader = csv.DictReader(fh)
        recs = [{**r, **(moved or {}).get(r["id"], {})} for r in reader if r["id"] in ids]
        fields = reader.fieldnames
    for r in list(recs):
        if edits and r["id"] in edits:
            recs.append({**r, **edits[r["id"]], "id": r["id"] + "_edited"})
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(recs)
    return path


def test_cli_simulates_counts_unsupported_and_writes_outputs(tmp_path, capsys):
    # The NVFP4 row on an H100 (which the project has, without FP4 units) and on a system it lacks.
    table = _subset(tmp_path / "t.csv", {SIMULATED, FP4, ARCHITECTURE},
                    edits={SIMULATED: {"system": "x9000_sxm"}, FP4: {"system": "x9000_sxm"},
                           ARCHITECTURE: {"system": "h200_sxm", "model_path": "openai/gpt-oss-20b"}},
                    moved={FP4: {"system": "h100_sxm"}})
    out = tmp_path / "out"
    main([f"csv={table}", f"out={out}", "jobs=1"])
    text = capsys.readouterr().out
    assert "(6 rows): 1 simulated, 0 failed, 5 not expressible" in text
    assert "  hardware the project lacks (no conf/hardware spec)" in text
    assert "      1  unsupported architecture" in text
    assert "  NVFP4 on hardware without FP4 units" in text
    assert "h100_sxm trtllm Qwen3-32B 1024x128" in text and "overall" in text and "5-32 clients" in text
    for name in ("rows.csv", "rows.parquet", "matrix.json", "report.txt", "matrix.html", "matrix.svg",
                 "matrix.vl.json"):
        assert (out / name).is_file(), name
    doc = json.loads((out / "matrix.json").read_text())
    assert doc["schema"] == "inferplan.silicon_matrix/1" and doc["status"] == "completed"
    by_reason = doc["counts"]["unsupported_by_reason"]
    assert by_reason == {"architecture": 1, "hardware": 3, "fp4_units": 1}  # (hardware: x9000 twice, B300)
    assert doc["overall"]["rows"] == 1 and doc["overall"]["ttft"]["rows"] == 1
    rec = next(r for r in csv.DictReader((out / "rows.csv").open()) if r["id"] == SIMULATED)
    assert rec["status"] == "simulated" and rec["preset"] == "trtllm_v1_serve" and rec["band"] == "5-32"
    assert int(rec["requests"]) == 80 == int(rec["completed"])  # the client's 10 x 8 clients
    assert float(rec["ttft_error_pct"]) == pytest.approx(
        100 * (float(rec["sim_ttft_p50_s"]) - float(rec["measured_ttft_s"])) / float(rec["measured_ttft_s"]))
    assert "+scenario.traffic={kind:closed_loop,clients:8,requests:80" in rec["overrides"]
    assert "low_tokens:819,high_tokens:1024" in rec["overrides"]  # uniform in [int(0.8 L), L]
    assert "low_tokens:102,high_tokens:128" in rec["overrides"]
    assert "<svg" in (out / "matrix.svg").read_text()[:2000]
    # The dashboard's Calibration page finds and reads the folder.
    assert matrix_folders([out]) == [out]
    m = load_matrix(out)
    assert m.chart is not None and list(m.partitions["partition"]) == ["h100_sxm trtllm Qwen3-32B 1024x128", "overall"]


def test_a_failing_row_is_a_record_with_its_one_line_reason(tmp_path):
    row = next(r for r in read_table() if r.id == SIMULATED)
    kimi = dataclasses.replace(row, id="kimi_on_one_h100", model_path="moonshotai/Kimi-K2.5", precision="int4",
                               gemm_quant_mode="int4_wo", moe_quant_mode="int4_wo")  # ~550 GB on one 80 GB GPU
    run = run_matrix([kimi, row], tmp_path, jobs=1)
    by_id = {r["id"]: r for r in run.records}
    assert by_id["kimi_on_one_h100"]["status"] == "failed"
    assert "\n" not in by_id["kimi_on_one_h100"]["detail"] and "InputError" in by_id["kimi_on_one_h100"]["detail"]
    assert by_id[SIMULATED]["status"] == "simulated"
    assert len(list(csv.DictReader((tmp_path / "rows.csv").open()))) == 2


def test_an_interrupted_run_keeps_the_rows_that_finished(tmp_path):
    rows = [r for r in read_table() if r.id == SIMULATED]
    rows = [rows[0], dataclasses.replace(rows[0], id="second"), dataclasses.replace(rows[0], id="third")]

    def stop_after_first(rec):
        raise KeyboardInterrupt

    run = run_matrix(rows, tmp_path, jobs=1, on_record=stop_after_first)
    assert run.interrupted_by == 2 and [r["id"] for r in run.records] == [SIMULATED]
    assert [r["id"] for r in csv.DictReader((tmp_path / "rows.csv").open())] == [SIMULATED]


@pytest.mark.parametrize("argv,message", [
    (["jobs=0"], "command line: jobs: must be a whole number >= 1, got '0'"),
    (["csv=/nonexistent/t.csv"], "/nonexistent/t.csv: path: the measured-runs table is missing"),
    (["colour=red"], "command line: colour=red: unknown argument"),
    (["ids=no_such_row"], "command line: ids: no row 'no_such_row' in the table"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as stop:
        main([*argv, f"out={tmp_path}"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1


def test_resume_runs_only_the_rows_the_folder_lacks(tmp_path):
    first = next(r for r in read_table() if r.id == SIMULATED)
    second = dataclasses.replace(first, id="second", clients=4)
    run_matrix([first], tmp_path, jobs=1)
    seen = []
    run = run_matrix([first, second], tmp_path, jobs=1, resume=True, on_record=lambda rec: seen.append(rec["id"]))
    assert seen == ["second"]  # the first row's record was read back, not simulated again
    assert [r["id"] for r in run.records] == [SIMULATED, "second"]
    assert run.records[0]["ttft_error_pct"] == pytest.approx(run_matrix([first], tmp_path / "again").records[0]
                                                              ["ttft_error_pct"])
    assert [r["id"] for r in csv.DictReader((tmp_path / "rows.csv").open())] == [SIMULATED, "second"]
