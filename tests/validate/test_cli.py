"""`python -m sim.validate` and `python -m sim.validate.published` end to end: files, schema, the overlay
round trip, and one-line errors with exit status 2."""
from __future__ import annotations

import json
import subprocess
import sys

import altair as alt
import pyarrow.parquet as pq
import pytest
import yaml

from inferplan.errors import InputError
from sim.validate.published import read_rows, sharegpt_standin

A100 = "scenario.pools.main.hardware=a100_80gb"


def run(*args: str, cwd, module: str = "sim.validate") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_replay_writes_the_documented_files(tmp_path, samples):
    out = tmp_path / "v"
    proc = run(f"measured={samples / 'synthetic_generic.csv'}", "scenario=smoke", A100, f"out={out}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "validation.json").read_text())
    assert doc["schema"] == "inferplan.validation/1"
    assert set(doc) >= {"measured", "deployment", "overlay_in_effect", "baseline", "fit", "files", "per_request_comparable"}
    assert doc["measured"]["requests_used"] == 200 and doc["per_request_comparable"] is True
    assert doc["deployment"]["settings"]["hardware"] == {"value": "a100_80gb", "source": "command line"}
    assert doc["deployment"]["settings"]["instances"]["source"] == "validation default (one server)"
    base = doc["baseline"]
    assert set(base["metrics"]) == {"ttft_s", "tpot_s", "e2e_s"}
    assert set(base["metrics"]["ttft_s"]) == {"p50", "p90", "p99", "mean"}
    assert set(base["metrics"]["ttft_s"]["p99"]) == {"measured", "simulated", "error_pct", "abs_error_pct"}
    assert set(base["by_load"]) == {"measured_inflight", "measured_rate_per_s", "sim_busy_fraction"}
    # The shipped sample was made with 4 ms overhead and 0.8 GEMM efficiency: the defaults run fast.
    assert base["metrics"]["tpot_s"]["p50"]["error_pct"] < -15
    table = pq.read_table(out / "validation_requests.parquet")
    assert table.num_rows == 200 and {"measured_ttft_s", "sim_ttft_s", "sim_ttft_error_pct", "measured_inflight"} <= set(table.column_names)
    for name in ("validation.html", "validation.vl.json", "replay/summary.json", "replay/DONE"):
        assert (out / name).exists(), name
    assert "ttft_ms" in proc.stdout and "assumed" not in proc.stdout.split("deployment:")[0]
    chart = alt.VConcatChart.from_dict(json.loads((out / "validation.vl.json").read_text()))  # schema-valid spec
    assert len(chart.vconcat) == 3


def test_fit_overlay_round_trip(tmp_path, samples):
    out = tmp_path / "fit"
    log = samples / "synthetic_vllm_v26.json"
    proc = run(f"measured={log}", f"out={out}", "fit=true", "max_simulations=24", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "validation.json").read_text())
    fit = doc["fit"]
    assert fit["split"]["train_requests"] == 140 and fit["heldout"]["requests"] == 60
    assert fit["simulations"] <= 24
    overlay = out / "conf" / "overlay" / "synthetic_vllm_v26.yaml"
    assert fit["overlay"]["yaml"] == str(overlay)
    values = yaml.safe_load(overlay.read_text())
    assert values["cost"]["step_overhead_s"] == pytest.approx(fit["params"]["step_overhead_s"])
    assert values["cost"]["efficiency_scale"]["attn_decode"] == pytest.approx(fit["params"]["efficiency_scale"]["attention"])
    assert "held-out requests, with the fitted overlay" in proc.stdout
    # Applied to a later validation: recorded and printed.
    again = run(f"measured={log}", f"out={tmp_path / 'again'}", f"overlay={overlay}", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    doc2 = json.loads((tmp_path / "again" / "validation.json").read_text())
    assert doc2["overlay_in_effect"]["path"] == str(overlay)
    assert doc2["deployment"]["settings"]["step_overhead_s"]["value"] == pytest.approx(fit["params"]["step_overhead_s"])
    assert "overlay in effect" in again.stdout
    # Applied to a simulator run the Hydra way.
    sim_dir = tmp_path / "sim"
    assert fit["overlay"]["apply"] == f"python -m sim --config-dir {out / 'conf'} +overlay=synthetic_vllm_v26 scenario=<scenario>"
    proc = run("--config-dir", str(out / "conf"), "+overlay=synthetic_vllm_v26", "scenario=smoke",
               "scenario.traffic.num_requests=40", f"hydra.run.dir={sim_dir}", cwd=tmp_path, module="sim")
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load((sim_dir / ".hydra" / "config.yaml").read_text())
    assert cfg["cost"]["step_overhead_s"] == pytest.approx(fit["params"]["step_overhead_s"])
    assert cfg["scenario"]["frontend_overhead_s"] == pytest.approx(fit["params"]["frontend_overhead_s"])
    # ... and as plain overrides.
    args = (out / "overlay.args").read_text().split()
    proc = run("scenario=smoke", "scenario.traffic.num_requests=40", f"hydra.run.dir={tmp_path / 'sim2'}", *args,
               cwd=tmp_path, module="sim")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("args, expected", [
    ([], "error: command line: measured: missing (fix: give measured=<benchmark log: vLLM JSON, SGLang JSONL, CSV or Parquet>)"),
    (["measured=nope.csv"], "error: nope.csv: path: file not found (fix: give the CSV with a header row"),
    (["measured={csv}", "fit=maybe"], "error: command line: fit: must be true or false, got 'maybe' (fix: give fit=true)"),
    (["measured={csv}", "format=xml"], "error: command line: format: unknown format 'xml' (fix: use one of: auto, vllm, sglang, table)"),
    (["measured={bad}"], "error: {bad}: prompt_tokens (line 2): is negative: '-4' (fix: lengths and times must be >= 0)"),
    (["measured={csv}", "scenario.pools.main.hardware=tpu9"], "error: conf/hardware: name: unknown hardware 'tpu9'"),
    (["measured={csv}", "holdout_fraction=1.5"], "error: command line: holdout_fraction: must be between 0 and 1"),
])
def test_input_mistakes_give_one_line_and_exit_2(tmp_path, samples, args, expected):
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n0,-4,5,0.1,0.5\n")
    fill = {"csv": samples / "synthetic_generic.csv", "bad": bad}
    proc = run(*[a.format(**fill) for a in args], f"out={tmp_path / 'o'}", cwd=tmp_path)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(expected.format(**fill)), lines[0]


def test_published_rows_run_as_documented(tmp_path):
    proc = run("rows=G01", f"out={tmp_path}", cwd=tmp_path, module="sim.validate.published")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "published.json").read_text())
    (row,) = doc["rows"]
    assert row["id"] == "G01" and row["basis"] == "per_request"
    fig = row["figures"]["output_tok_per_s"]
    assert fig["published"] == 84.28 and 40 < fig["simulated"] < 170  # a factor-2 sanity band, not a fit


def test_published_table_missing_is_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="missing.csv: path: the published-results table is missing"):
        read_rows(tmp_path / "missing.csv")


def test_sharegpt_standin_hits_its_documented_means_and_filter():
    prompt, output = sharegpt_standin(5000, seed=0)
    assert prompt.mean() == pytest.approx(215.0, rel=0.05) and output.mean() == pytest.approx(194.3, rel=0.05)
    assert prompt.min() >= 4 and output.min() >= 4 and prompt.max() <= 1024 and (prompt + output).max() <= 2048


def test_published_default_table_is_shipped_and_maps_engines():
    from sim.validate.published import CSV_PATH, engine_preset, median_abs_errors
    rows = {r["id"]: r for r in read_rows()}
    assert CSV_PATH.is_file() and len(rows) == 10
    assert engine_preset(rows["A01"]) == "sglang" and engine_preset(rows["A02"]) == "vllm_v0"
    assert engine_preset({**rows["A02"], "engine_version": "0.8.5"}) == "vllm_v1"
    assert engine_preset({**rows["A02"], "engine": "TensorRT-LLM"}) == "trtllm"
    with pytest.raises(InputError, match="no engine preset"):
        engine_preset({**rows["A02"], "engine": "llama.cpp"})
    # median over rows of each row's mean |error| in the family
    res = [{"figures": {"tpot_mean_ms": {"error_pct": -4.0}, "tpot_median_ms": {"error_pct": 8.0}}},
           {"figures": {"tpot_p99_ms": {"error_pct": 10.0}}}, {"figures": {"tpot_mean_ms": {"error_pct": 1.0}}}]
    assert median_abs_errors(res) == {"tpot": 6.0}


def test_published_any_table_by_csv(tmp_path):
    import csv
    from sim.validate.published import CSV_PATH
    with CSV_PATH.open(newline="") as fh:
        reader = csv.DictReader(fh)
        fields, rows = reader.fieldnames, [r for r in reader if r["id"] == "G01"]
    table = tmp_path / "t.csv"
    with table.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerow({**rows[0], "id": "X1"})
    proc = run(f"csv={table}", f"out={tmp_path / 'o'}", cwd=tmp_path, module="sim.validate.published")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "o" / "published.json").read_text())
    assert [r["id"] for r in doc["rows"]] == ["X1"] and "throughput" in doc["median_abs_error_pct"]


@pytest.mark.parametrize("hf_id,model", [("meta-llama/Llama-3.1-70B-Instruct", "llama3_1_70b"),
                                         ("meta-llama/Llama-3.3-70B-Instruct", "llama3_3_70b"),
                                         ("meta-llama/Llama-2-70b-chat-hf", "llama2_70b"),
                                         ("meta-llama/Llama-2-70b-hf", "llama2_70b"),
                                         ("deepseek-ai/DeepSeek-R1", "deepseek_r1"),
                                         ("meta-llama/Llama-3.1-8B-Instruct", "llama3_1_8b")])
def test_model_for_id_matches_the_published_rows_models(hf_id, model):
    from inferplan.specs import load_model
    from sim.validate.deployment import model_for_id
    assert model_for_id(hf_id) == model
    assert load_model(model).num_layers in (32, 61, 80)
