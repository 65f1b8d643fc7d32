"""One row per configuration, from chosen runs or from a sweep, ready for the table, the bars and the Pareto chart.

A sweep's `sweep.parquet` carries the jobs' overrides and flattened summary metrics (`kpis.flatten_summary`
names); any metric it lacks is filled in from the job's own `summary.json` via `run_dir`. Every column that is
neither a metric nor bookkeeping is an override, and the overrides that vary between jobs label the rows.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from dashboard import aggregate
from dashboard.data import PARTIAL_STATUS, explain, is_partial, open_run, read_sweep, resolve_job_dir, run_label
from dashboard.kpis import flatten_summary
from inferplan.errors import InputError
from sim.results.flat import METRIC_NAMES

BOOKKEEPING = {"run_dir", "job", "job_id", "job_num", "status", "error", "label", "done", "partial"}
# Metric names `flatten_summary` produces (sim/results/flat.py), plus one older sweeps carried.
_FLAT = set(METRIC_NAMES) | {"billing_granularity_s"}
METRICS = _FLAT | {f"{m}_{s}_s" for m in ("ttft", "tpot", "e2e") for s in ("p50", "p90", "p99", "mean")}

COSTS = {"usd_per_million_output_tokens": "Cost per 1M output tokens (USD)", "usd": "Total cost (USD)",
         "node_hours": "Node-hours (h)"}
# metric -> (axis title, display scale, SLO target column)
LATENCIES = {"ttft_p99_s": ("TTFT P99 (s)", 1.0, "slo_ttft_p99_s"),
             "tpot_p99_s": ("TPOT P99 (ms)", 1e3, "slo_tpot_p99_s"),
             "e2e_p99_s": ("E2E P99 (s)", 1.0, None)}
# table / bar columns: metric -> (title with unit, display scale)
SHOWN = {"ttft_p50_s": ("TTFT P50 (s)", 1.0), "ttft_p99_s": ("TTFT P99 (s)", 1.0),
         "tpot_p50_s": ("TPOT P50 (ms)", 1e3), "tpot_p99_s": ("TPOT P99 (ms)", 1e3),
         "attainment": ("SLO attainment (%)", 100.0), "requests_per_s": ("Throughput (req/s)", 1.0),
         "output_tokens_per_s": ("Output tokens (tok/s)", 1.0),
         "usd_per_million_output_tokens": ("Cost per 1M output tokens (USD)", 1.0), "usd": ("Total cost (USD)", 1.0),
         "node_hours": ("Node-hours (h)", 1.0)}


def override_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c not in METRICS and c not in BOOKKEEPING and not c.startswith("slo_met_")]


def _labels(df: pd.DataFrame) -> pd.Series:
    cols = override_columns(df)
    varying = [c for c in cols if df[c].astype(str).nunique() > 1] or cols
    if not varying:
        return pd.Series([f"job {i}" for i in range(len(df))], index=df.index)
    return df[varying].astype(str).apply(lambda r: ", ".join(f"{k}={v}" for k, v in r.items()), axis=1)


def runs_frame(paths: list[Path], labels: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """Chosen runs as rows (flattened summaries), partial ones marked in their label; runs that cannot be opened
    become notes instead."""
    rows, notes = [], []
    for path, label in zip(paths, labels):
        try:
            run = open_run(path)
        except InputError as err:
            notes.append(explain(err))
            continue
        rows.append({"label": run_label(label, run.partial), "partial": run.partial, "run_dir": str(path),
                     **flatten_summary(run.summary)})
    return pd.DataFrame(rows), notes


def sweep_frame(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """A sweep's jobs as rows, with missing metrics filled from each job's summary and partial jobs marked in their
    label; notes list jobs that failed."""
    df = read_sweep(path).reset_index(drop=True)
    notes = []
    # A job is partial by its own summary when it can be read, else by the sweep's `status` column.
    partial = df["status"].eq(PARTIAL_STATUS) if "status" in df else pd.Series(False, index=df.index)
    if "run_dir" in df:
        fills = []
        for i, run_dir in df["run_dir"].items():
            job = resolve_job_dir(path, run_dir)
            if job is None:
                continue
            try:
                summary = open_run(job).summary
            except InputError as err:
                notes.append(explain(err))
                continue
            partial[i] = is_partial(summary)
            fills.append({"_row": i, **flatten_summary(summary)})
        if fills:
            extra = pd.DataFrame(fills).set_index("_row").drop(columns=["scenario", "seed"], errors="ignore")
            for col in extra.columns:
                if col not in df:
                    df[col] = extra[col]
                else:
                    df[col] = df[col].where(df[col].notna(), extra[col])
    if "slo_met" not in df:
        df["slo_met"] = _met_from_targets(df)
    df.insert(0, "label", [run_label(text, bool(p)) for text, p in zip(_labels(df), partial)])
    df["partial"] = partial.astype(bool)
    return df, notes


def _met_from_targets(df: pd.DataFrame) -> pd.Series:
    """Per row: every latency target with both a value and a target met (None when none can be judged)."""
    checks = [(df[m] <= df[t]) for m, (_, _, t) in LATENCIES.items() if t and m in df and t in df]
    if not checks:
        return pd.Series([None] * len(df), index=df.index, dtype=object)
    return pd.concat(checks, axis=1).all(axis=1)


def annotate(df: pd.DataFrame, cost: str, latency: str) -> pd.DataFrame:
    """Adds `meets_slo`, `frontier` (Pareto-optimal in cost and latency) and `cheapest` (cheapest meeting SLO).
    A partial run is never the cheapest: its cost and latencies cover only the time it simulated."""
    out = df.copy()
    out["meets_slo"] = out["slo_met"] if "slo_met" in out else None
    usable = out.dropna(subset=[c for c in (cost, latency) if c in out])
    out["frontier"] = False
    out["cheapest"] = False
    if cost in out and latency in out and not usable.empty:
        out.loc[usable.index, "frontier"] = aggregate.pareto_front(usable, cost, latency)
        complete = usable[~usable["partial"].astype(bool)] if "partial" in usable else usable
        best = aggregate.cheapest_meeting_slo(complete, cost, "meets_slo") if not complete.empty else None
        if best is not None:
            out.loc[best, "cheapest"] = True
    return out


def display_table(df: pd.DataFrame) -> pd.DataFrame:
    """The side-by-side table: label, SLO verdict and the shown metrics with units in their headers."""
    out = pd.DataFrame({"configuration": df["label"]})
    if "slo_met" in df:
        out["meets SLO"] = df["slo_met"].map({True: "yes", False: "no"}).fillna("n/a")
    for col, (title, scale) in SHOWN.items():
        if col in df:
            out[title] = pd.to_numeric(df[col], errors="coerce") * scale
    return out.reset_index(drop=True)


def bars_long(df: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Long form `label, metric, value` of the chosen metrics, scaled to their display unit."""
    parts = [pd.DataFrame({"label": df["label"], "metric": SHOWN[m][0],
                           "value": pd.to_numeric(df[m], errors="coerce") * SHOWN[m][1]})
             for m in metrics if m in df and m in SHOWN]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["label", "metric", "value"])
