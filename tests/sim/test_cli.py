"""`python -m sim` end to end: the run folder it writes, and one-line errors for config mistakes."""
from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest


def run_sim(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_smoke_writes_the_documented_run_folder(tmp_path):
    out = tmp_path / "run"
    proc = run_sim("scenario=smoke", "scenario.traffic.num_requests=300", f"hydra.run.dir={out}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in ("requests.parquet", "timeseries.parquet", "pools.parquet", "summary.json", "DONE", ".hydra/config.yaml"):
        assert (out / name).exists(), name
    req = pq.read_table(out / "requests.parquet")
    assert req.num_rows == 300
    assert set(req.column_names) >= {"request_id", "arrival_s", "prompt_tokens", "output_tokens", "cached_tokens",
                                     "pool", "instance", "status", "reject_reason", "first_token_s", "finish_s",
                                     "ttft_s", "tpot_s", "e2e_s", "preemptions"}
    ts = pq.read_table(out / "timeseries.parquet")
    assert set(ts.column_names) >= {"t_s", "arrivals", "completions", "queued", "running", "instances",
                                    "kv_utilization", "busy_fraction", "cost_usd"}
    assert sum(ts.column("arrivals").to_pylist()) == 300
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"]["arrived"] == 300
    assert summary["cost_model"]["kind"] in ("analytical", "measured", "mixed")
    assert "ttft_ms" in proc.stdout and "cost model:" in proc.stdout


def test_the_first_line_is_the_verdict_and_check_true_makes_a_miss_exit_1(tmp_path):
    # code_assistant misses its TTFT and TPOT P99 targets (docs/scenarios.md); smoke meets every SLO
    proc = run_sim("scenario=code_assistant", "check=true", f"hydra.run.dir={tmp_path / 'ca'}", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("FAIL: tpot_p99 completion@main ") and "ms > 25 ms" in first, first
    assert "ttft_p99 completion@main" in first
    assert (tmp_path / "ca" / "DONE").exists()                  # everything written before the exit
    proc = run_sim("scenario=smoke", "scenario.traffic.num_requests=100", "scenario.slo.tpot_p99_s=0.001",
                   f"hydra.run.dir={tmp_path / 's1'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr                      # without check=true: reported, exit 0
    assert proc.stdout.startswith("FAIL: tpot_p99 default@main "), proc.stdout[:300]
    proc = run_sim("scenario=smoke", "scenario.traffic.num_requests=100", "check=true",
                   f"hydra.run.dir={tmp_path / 's'}", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.splitlines()[0] == "PASS", proc.stdout[:300]


@pytest.mark.parametrize("override, expected", [
    ("scenario=nope", "unknown scenario 'nope' (fix: use one of:"),
    ("batching=nope", "unknown batching 'nope' (fix: use one of:"),
    ("scenario.pools.main.hardware=tpu9", "unknown hardware 'tpu9'"),
    ("+scenario.pools.main.tpx=2", "tpx: unknown key (fix: valid keys: hardware, model,"),
    ("scenario.nokey=1", "not in the composed config"),
    ("scenario.pools.main.model=deepseek_v3", "does not fit 1 x h100_sxm"),
    ("+scenario.pools.main.engine={name: vllm_v1, max_num_seqs: lots}",
     "pools.main: engine: max_num_seqs: has the wrong type: 'lots' (fix: give a int)"),
    ("+scenario.placement={routes: {chat: main}}", "placement.routes.chat: must be a list of pool names"),
    # refused before anything is allocated, with the limit this machine's memory sets
    ("scenario.traffic.num_requests=1e12", "traffic.num_requests: 1,000,000,000,000 requests would need about"),
    ("seed=abc", "conf/config.yaml: seed: must be a whole number >= 0, got 'abc'"),
    ("check=maybe", "conf/config.yaml: check: must be true or false, got 'maybe'"),
    ("scenario.slo.ttft_p99_s=0", "slo.ttft_p99_s: must be a latency > 0 s, got 0"),
    ("scenario.slo.tpot_p99_s=-0.1", "slo.tpot_p99_s: must be a latency > 0 s, got -0.1"),
    # Llama-3-8B: 32 heads, 8 KV heads, 14,336 intermediate: engines shard them evenly over TP ranks
    ("+scenario.pools.main.tp=3", "tp: tp=3 does not divide llama3_8b's 32 attention heads"),
])
def test_config_mistakes_give_one_line_and_exit_2(tmp_path, override, expected):
    proc = run_sim(override, f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and expected in lines[0]
    assert "Traceback" not in proc.stderr
