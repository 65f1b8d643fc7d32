"""Writes a run folder (docs/results.md): Parquet tables, summary.json, and a DONE marker written last."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sim.core.run import SimResult, nan_to_none

REQUEST_TYPES = {
    "request_id": pa.int64(), "arrival_s": pa.float64(), "prompt_tokens": pa.int64(), "output_tokens": pa.int64(),
    "cached_tokens": pa.int64(), "request_class": pa.string(), "pool": pa.string(), "instance": pa.int32(),
    "status": pa.string(), "reject_reason": pa.string(), "first_token_s": pa.float64(), "finish_s": pa.float64(),
    "ttft_s": pa.float64(), "tpot_s": pa.float64(), "e2e_s": pa.float64(), "preemptions": pa.int32(),
    "fallback": pa.bool_(), "prefill_pool": pa.string(), "itl_max_s": pa.float64(),
}


def _write(table: pa.Table, path: Path) -> None:
    # Fixed writer options and no wall-clock metadata: the same run gives byte-identical files.
    pq.write_table(table, path, compression="zstd", use_dictionary=True, write_statistics=True)


def interval_p99(times: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """P99 of `values` grouped by which interval (edges[i-1], edges[i]] their `times` fall in."""
    out = np.full(len(edges), np.nan)
    ok = np.isfinite(times) & np.isfinite(values)
    if not ok.any():
        return out
    idx = np.searchsorted(edges, times[ok], side="left")
    vals = values[ok]
    order = np.argsort(idx, kind="stable")
    idx, vals = idx[order], vals[order]
    bounds = np.flatnonzero(np.diff(idx)) + 1
    for group_idx, group in zip(np.split(idx, bounds), np.split(vals, bounds)):
        if group_idx.size and group_idx[0] < len(edges):
            out[group_idx[0]] = np.percentile(group, 99)
    return out


def write_run(result: SimResult, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    done = out / "DONE"
    if done.exists():
        done.unlink()
    cols = result.requests
    _write(pa.table({k: pa.array(cols[k], type=t) for k, t in REQUEST_TYPES.items()}), out / "requests.parquet")
    ts = {k: np.asarray(v, dtype=np.float64) for k, v in result.timeseries_columns.items()}
    for k in ("arrivals", "completions", "queued", "running", "instances", "overload_level"):
        ts[k] = ts[k].astype(np.int64)
    edges = ts["t_s"]
    ts["ttft_p99_s"] = interval_p99(cols["first_token_s"], cols["ttft_s"], edges)
    ts["tpot_p99_s"] = interval_p99(cols["finish_s"], cols["tpot_s"], edges)
    _write(pa.table(ts), out / "timeseries.parquet")
    pc = result.pool_columns
    pool_types = {"t_s": pa.float64(), "pool": pa.string(), "kv_utilization": pa.float64(), "busy_fraction": pa.float64()}
    _write(pa.table({k: pa.array(v, type=pool_types.get(k, pa.int64())) for k, v in pc.items()}), out / "pools.parquet")
    (out / "summary.json").write_text(json.dumps(nan_to_none(result.summary), indent=2, sort_keys=False) + "\n")
    done.write_text("ok\n")
    return out
