"""The only writer of a run folder (docs/results.md; names and types in sim/results/schema.py): the Parquet tables,
the summary, and the DONE marker written last."""
from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from inferplan.columns import rows_of
from sim.results.arrow_columns import arrow_column
from sim.results.result import SimResult, nan_to_none
from sim.results.schema import (DONE, INTERRUPTED, POOL_TYPES, POOLS, REQUEST_TYPES, REQUESTS, SUMMARY, TIMESERIES,
                                TIMESERIES_COUNTS, summary_problem)


# Fixed writer options and no wall-clock metadata: the same run gives byte-identical files.
_OPTIONS = {"compression": "zstd", "use_dictionary": True, "write_statistics": True}
ROWS_PER_GROUP = 1024 * 1024  # rows per row group of requests.parquet (pyarrow's default maximum for write_table)


def _write(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, **_OPTIONS)


def write_requests(cols: dict, path: Path, rows_per_group: int = ROWS_PER_GROUP) -> None:
    """`requests.parquet` one row group at a time: each group's Arrow arrays are built from slices of the numpy
    columns and freed once written, so no Arrow copy of the whole table (its string columns as utf8 buffers) exists
    beside the columns. The bytes are those `pq.write_table` gives for the whole table with the same
    `row_group_size` (tests/sim/test_write_requests.py). Derived columns (`inferplan/columns.py`) are computed a
    group at a time too."""
    n = len(cols["status"])
    schema = pa.schema(list(REQUEST_TYPES.items()))
    with pq.ParquetWriter(path, schema, **_OPTIONS) as writer:
        for lo in range(0, n, rows_per_group) if n else [0]:  # (no rows: one empty table, as write_table writes)
            group = rows_of(cols, lo, lo + rows_per_group)
            writer.write_table(pa.table({k: arrow_column(group[k], t) for k, t in REQUEST_TYPES.items()},
                                        schema=schema), row_group_size=rows_per_group)


def interval_p99(times: np.ndarray, values: np.ndarray, edges: np.ndarray, rows_per_chunk: int = 1 << 20) -> np.ndarray:
    """P99 of `values` grouped by which interval (edges[i-1], edges[i]] their `times` fall in.

    Every group at once: one sort by (interval, value), then numpy's default ("linear") percentile read off each
    group's order statistics with numpy's own arithmetic (virtual index (n - 1) q, q = 99 / 100, the same two-sided
    interpolation), so each value equals `np.percentile(group, 99)` (tests/sim/test_interval_p99.py); a call per
    interval cost seconds on long runs. The sort runs over spans of whole intervals of about `rows_per_chunk` rows
    each (a group's values are the same however the intervals are spanned): its index arrays, 33 bytes a row,
    exist for one span at a time, not for every request of a 10-million-request run."""
    m = len(edges)
    out = np.full(m, np.nan)
    n = len(times)
    idx = np.empty(n, dtype=np.int32)  # each row's interval; m: none (a non-finite time or value, or after the end)
    for lo in range(0, n, rows_per_chunk):
        t, v = times[lo:lo + rows_per_chunk], values[lo:lo + rows_per_chunk]
        ix = np.searchsorted(edges, t, side="left")
        ix[~(np.isfinite(t) & np.isfinite(v))] = m
        idx[lo:lo + rows_per_chunk] = ix
    cum = np.cumsum(np.bincount(idx, minlength=m + 1)[:m])
    if not len(cum) or cum[-1] == 0:
        return out
    cuts = np.unique(np.searchsorted(cum, np.arange(rows_per_chunk, int(cum[-1]), rows_per_chunk), side="left") + 1)
    bounds = [0, *(int(c) for c in cuts if 0 < c < m), m]
    for ga, gb in zip(bounds[:-1], bounds[1:]):
        rows = np.flatnonzero((idx >= ga) & (idx < gb))
        if len(rows):
            _group_p99(idx[rows], np.asarray(values[rows], dtype=np.float64), out)
    return out


def _group_p99(idx: np.ndarray, vals: np.ndarray, out: np.ndarray) -> None:
    """Into out[g]: the P99 of the values of group g, for the groups in `idx` (one per value)."""
    order = np.lexsort((vals, idx))
    idx = idx[order]
    vals = vals[order]
    del order
    starts = np.concatenate(([0], np.flatnonzero(np.diff(idx)) + 1))
    n = np.diff(np.append(starts, len(idx)))
    q = np.true_divide(99, 100)
    virtual = (n - 1) * q
    prev = np.floor(virtual)
    above = virtual >= n - 1  # (one value: numpy reads the last element on both sides, gamma = virtual + 1)
    lo = starts + np.where(above, n - 1, prev).astype(np.intp)
    hi = starts + np.where(above, n - 1, prev + 1).astype(np.intp)
    gamma = virtual - np.where(above, -1.0, prev)
    a, b = vals[lo], vals[hi]
    diff = b - a
    out[idx[starts]] = np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)


def mark_interrupted(job_dir: str | Path, signum: int, overrides: list[str] | None = None) -> None:
    """A sweep job that a signal stopped before its simulation ran: its folder says so (`INTERRUPTED`), so the
    sweep's table lists it `interrupted`, not `failed`. Nothing is marked where the run had written its folder.
    The marker's first line is the reason; `overrides` (the job's, one per line after it) let the table list a
    job stopped before Hydra wrote its `.hydra/` files."""
    job_dir = Path(job_dir)
    if (job_dir / DONE).exists():
        return
    job_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"{signal.Signals(signum).name} before the simulation ran", *(overrides or [])]
    (job_dir / INTERRUPTED).write_text("\n".join(lines) + "\n")


def write_run(result: SimResult, out_dir: str | Path) -> Path:
    """Write `result` into `out_dir` (created); an earlier DONE is removed first and written again last."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    done = out / DONE
    if done.exists():
        done.unlink()
    cols = result.requests
    # (the interval P99s before the request table: their temporaries and the writer's Arrow buffers, which its
    # memory pool keeps for reuse, are then not resident at once)
    ts = {k: np.asarray(v, dtype=np.float64) for k, v in result.timeseries_columns.items()}
    for k in TIMESERIES_COUNTS:
        ts[k] = ts[k].astype(np.int64)
    edges = ts["t_s"]
    ts["ttft_p99_s"] = interval_p99(cols["first_token_s"], cols["ttft_s"], edges)
    ts["tpot_p99_s"] = interval_p99(cols["finish_s"], cols["tpot_s"], edges)
    write_requests(cols, out / REQUESTS)
    _write(pa.table({k: arrow_column(v, pa.int64() if k in TIMESERIES_COUNTS else pa.float64())
                     for k, v in ts.items()}), out / TIMESERIES)
    pc = result.pool_columns
    _write(pa.table({k: arrow_column(v, POOL_TYPES.get(k, pa.int64())) for k, v in pc.items()}), out / POOLS)
    summary = nan_to_none(result.summary)
    problem = summary_problem(summary)
    if problem is not None:  # (a bug in the writer's caller, not bad input)
        raise ValueError(f"{out / SUMMARY}: field {problem[0]} {problem[1]} (sim/results/schema.py Summary)")
    (out / SUMMARY).write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")
    done.write_text("ok\n")
    return out
