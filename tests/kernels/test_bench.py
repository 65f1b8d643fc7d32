"""`python -m kernels.bench --quick` runs end to end under the interpreter and writes the promised Parquet."""
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from kernels.bench_cases import all_cases

REPO = Path(__file__).resolve().parents[2]
COLUMNS = {
    "kernel", "variant", "model", "layer", "m", "n", "k", "batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv",
    "head_dim", "flops", "bytes", "time_ms", "tflops_per_s", "gb_per_s", "roofline_pct", "bound", "precision",
    "baseline", "baseline_time_ms", "speedup_vs_baseline", "rel_err", "correct", "error",
    # provenance
    "gpu_name", "driver_version", "cuda_version", "sm_clock_mhz", "mem_clock_mhz", "max_sm_clock_mhz",
    "power_limit_w", "torch_version", "triton_version", "date_utc", "git_commit", "git_dirty", "quick",
}


def _bench(*args, interpret=True):
    env = {**os.environ, "TRITON_INTERPRET": "1" if interpret else "0"}
    return subprocess.run([sys.executable, "-m", "kernels.bench", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=240)


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU --quick runs compiled kernels, not this path")
def test_quick_writes_one_checked_row_per_case(tmp_path):
    out = tmp_path / "bench.parquet"
    proc = _bench("--quick", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = pq.read_table(out)
    assert set(table.column_names) == COLUMNS
    rows = table.to_pylist()
    cases = all_cases(quick=True)
    assert [(r["kernel"], r["variant"]) for r in rows] == [(c.kernel, c.variant) for c in cases]
    assert {r["kernel"] for r in rows} == {"gemm_fp8_block", "gemm_int8", "gemm_int4_wo", "moe_grouped_gemm",
                                           "attn_prefill", "attn_paged_decode", "attn_mla_decode"}
    for r in rows:
        assert r["correct"] and r["error"] == "" and r["rel_err"] < 5e-3, r
        assert r["time_ms"] > 0 and r["flops"] > 0 and r["bytes"] > 0, r
        assert r["quick"] and r["triton_version"] and r["date_utc"], r
    assert sum(r["baseline"] != "" for r in rows) >= len(rows) - 1  # only the cached-prefix prefill has none


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_full_run_without_gpu_exits_with_one_line(tmp_path):
    proc = _bench("--out", str(tmp_path / "x.parquet"), interpret=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no CUDA device" in proc.stderr
    assert not (tmp_path / "x.parquet").exists()
