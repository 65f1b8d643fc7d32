"""The prepared GPU script, rehearsed: its steps on the CPU, its time limits, and what it leaves in $OUT."""
from __future__ import annotations

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from calibrate import gpu_session


def test_calibration_step_rehearses_the_gpu_path(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    work.mkdir()
    code = gpu_session._step_calibrate(work, out, "h200", "llama3_8b", budget_s=10.0, dry_run=True)  # peaks and cut-off points inside
    assert code == 0
    assert {p.name for p in (out / "h200").iterdir()} == {"measurements.parquet", "fit.json", "h200.parquet"}
    summary = json.loads((work / "calibrate_llama3_8b.json").read_text())
    assert summary["measured"] > 0
    fit = json.loads((out / "h200" / "fit.json").read_text())
    assert fit["rehearsal"] is True and any(k.startswith("gemm/fp8_block/kernels.") for k in fit["impls"])


def test_a_step_past_its_time_is_killed_and_recorded(tmp_path):
    session = gpu_session.Session(tmp_path, "h200", total_s=60, dry_run=True)
    session.min_step_s = 0.5
    rc = session.run("sleeper", [sys.executable, "-c", "import time; print('hi', flush=True); time.sleep(30)"], 1.0)
    assert rc is None and session.steps[-1]["timed_out"] is True
    log = (tmp_path / "session.log").read_text()
    assert "hi" in log and "TIMED OUT" in log


def test_steps_are_skipped_when_the_session_time_is_spent(tmp_path):
    session = gpu_session.Session(tmp_path, "h200", total_s=5, dry_run=True)
    assert session.run("late", [sys.executable, "-c", "pass"], 100) is None
    assert session.steps[-1]["skipped"] is True


def test_bench_parts_merge_into_one_file_and_summary(tmp_path):
    parts = []
    for i, kernel in enumerate(("gemm_int8", "attn_prefill")):
        part = tmp_path / f"part{i}.parquet"
        pq.write_table(pa.table({"kernel": [kernel], "variant": ["v"], "correct": [i == 0]}), part)
        parts.append(part)
    assert gpu_session._merge_bench(parts + [tmp_path / "missing.parquet"], tmp_path / "kernels_bench.parquet") == 2
    session = gpu_session.Session(tmp_path, "h200", total_s=60, dry_run=True)
    summary = gpu_session._summary(session)
    assert summary["kernels_bench"] == {"rows": 2, "not_correct": ["attn_prefill/v"]}


def test_orchestrator_writes_its_summary_and_few_files(tmp_path, monkeypatch):
    """The whole orchestration with only the env step left in: log, env, summary; nothing but files under OUT."""
    monkeypatch.setattr(gpu_session, "MODELS", ())
    monkeypatch.setattr(gpu_session, "BENCH_GROUPS", {})
    monkeypatch.setitem(gpu_session.PLAN_S, "adapters", 0)
    assert gpu_session.orchestrate(tmp_path, "h200", total_s=60, dry_run=True) == 0
    files = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert files == {"session.log", "env.txt", "summary.json"} and len(files) <= 8
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["step"] for s in summary["steps"]] == ["env", "adapters"]
    assert summary["steps"][0]["rc"] == 0 and summary["steps"][1]["skipped"] is True
    assert "torch" in (tmp_path / "env.txt").read_text()
