"""Shrink run tables to what a chart needs, so a day-long, million-request run still draws in a blink.

Every function takes full tables (or a summary) and returns a small long-form DataFrame: at most `MAX_POINTS`
time buckets per series, percentiles computed per bucket here rather than in the browser. Pure pandas.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

MAX_POINTS = 1000  # per time series: more points than a chart is pixels wide only costs transfer time
RATE_POINTS = 300  # per-second counts are noisy: rates read better averaged over a few samples
NICE_BUCKETS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400)


def sample_interval_s(t_s: pd.Series) -> float:
    """The sampling interval of a time series (median spacing of `t_s`; the first sample's time if alone)."""
    t = np.sort(t_s.dropna().unique())
    if len(t) >= 2:
        return float(np.median(np.diff(t)))
    return float(t[0]) if len(t) == 1 and t[0] > 0 else 1.0


def nice_bucket_s(span_s: float, min_s: float = 1.0, target_buckets: int = 150) -> float:
    """A round bucket width (1 s, 5 s, 1 min, ...) giving about `target_buckets` buckets over `span_s`."""
    if not math.isfinite(span_s) or span_s <= 0:
        return float(min_s)
    want = max(span_s / target_buckets, min_s)
    for b in NICE_BUCKETS_S:
        if b >= want:
            return float(b)
    return float(math.ceil(want / 3600) * 3600)


def downsample(df: pd.DataFrame, how: dict[str, str], by: list[str] | None = None,
               max_points: int = MAX_POINTS) -> pd.DataFrame:
    """Merge consecutive samples into buckets so each series has at most `max_points` rows.

    `how` maps column -> pandas reduction ("sum" for counts, "mean" for gauges, "last" for cumulative figures).
    The bucket keeps the time of its last sample (`t_s` is an interval end). Returns `df` as is when small.
    """
    by = by or []
    per_series = df.groupby(by).size().max() if by else len(df)
    if df.empty or per_series <= max_points:
        return df[["t_s", *by, *how]].reset_index(drop=True)
    step = sample_interval_s(df["t_s"]) * math.ceil(per_series / max_points)
    bucket = np.ceil(df["t_s"] / step).rename("bucket")
    out = df.groupby([bucket, *[df[c] for c in by]], observed=True).agg({"t_s": "max", **how})
    return out.reset_index().drop(columns="bucket")[["t_s", *by, *how]]


def arrivals_and_capacity(ts: pd.DataFrame) -> pd.DataFrame:
    """Long form `t_s, series, value`: arrival and completion rates (req/s) and active instances."""
    interval = sample_interval_s(ts["t_s"])
    small = downsample(ts.assign(samples=1), {"arrivals": "sum", "completions": "sum", "instances": "mean",
                                              "samples": "sum"}, max_points=RATE_POINTS)
    width = small["samples"] * interval  # seconds covered by each bucket
    rates = pd.DataFrame({
        "t_s": small["t_s"],
        "Arrivals (req/s)": small["arrivals"] / width,
        "Completions (req/s)": small["completions"] / width,
        "Active instances": small["instances"],
    })
    return rates.melt("t_s", var_name="series", value_name="value")


def gauges(ts: pd.DataFrame, columns: dict[str, str], scale: float = 1.0) -> pd.DataFrame:
    """Long form `t_s, series, value` of time-series gauges (averaged per bucket), renamed by `columns`."""
    present = {c: label for c, label in columns.items() if c in ts.columns}
    small = downsample(ts, {c: "mean" for c in present})
    out = small.rename(columns=present).melt("t_s", var_name="series", value_name="value")
    out["value"] = out["value"] * scale
    return out


def pool_states(pools: pd.DataFrame) -> pd.DataFrame:
    """Long form `t_s, pool, state, instances`: instances starting, active and draining in each pool."""
    states = ["starting", "active", "draining"]
    small = downsample(pools, {s: "mean" for s in states}, by=["pool"])
    out = small.melt(["t_s", "pool"], value_vars=states, var_name="state", value_name="instances")
    out["state"] = pd.Categorical(out["state"], categories=states, ordered=True)
    return out.sort_values(["pool", "state", "t_s"]).reset_index(drop=True)


def latency_over_time(requests: pd.DataFrame, bucket_s: float) -> pd.DataFrame:
    """Long form `t_s, metric, percentile, value_s`: TTFT by first-token time, TPOT by finish time, per bucket.

    P50, P90 and P99 over the requests whose first token (TTFT) or last token (TPOT) fell in each bucket;
    `t_s` is the bucket end. Buckets without requests are absent.
    """
    parts = []
    for metric, value_col, time_col in (("TTFT", "ttft_s", "first_token_s"), ("TPOT", "tpot_s", "finish_s")):
        sub = requests[[time_col, value_col]].dropna()
        if sub.empty:
            continue
        bucket_end = (np.floor(sub[time_col] / bucket_s) + 1) * bucket_s
        q = sub[value_col].groupby(bucket_end).quantile([0.5, 0.9, 0.99]).unstack()
        q.columns = ["P50", "P90", "P99"]
        long = q.rename_axis("t_s").reset_index().melt("t_s", var_name="percentile", value_name="value_s")
        long.insert(1, "metric", metric)
        parts.append(long)
    if not parts:
        return pd.DataFrame(columns=["t_s", "metric", "percentile", "value_s"])
    return pd.concat(parts, ignore_index=True)


def time_breakdown(summary: dict) -> pd.DataFrame:
    """Long form `pool, category, seconds`: where each pool's iteration time went."""
    rows = [{"pool": pool, "category": cat.replace("_", " "), "seconds": float(sec)}
            for pool, info in (summary.get("pools") or {}).items()
            for cat, sec in ((info or {}).get("time_breakdown_s") or {}).items() if sec is not None]
    return pd.DataFrame(rows, columns=["pool", "category", "seconds"])


def pool_costs(summary: dict) -> pd.DataFrame:
    """`pool, hardware, model, instances_max, node_hours, usd, requests_completed`, one row per pool."""
    rows = [{"pool": pool, **{k: (info or {}).get(k) for k in
                              ("hardware", "model", "instances_max", "node_hours", "usd", "requests_completed")}}
            for pool, info in (summary.get("pools") or {}).items()]
    return pd.DataFrame(rows, columns=["pool", "hardware", "model", "instances_max", "node_hours", "usd",
                                       "requests_completed"])


def not_served(summary: dict) -> pd.DataFrame:
    """`reason, requests`: rejections by reason plus requests unfinished when the window closed; zero rows dropped."""
    requests = summary.get("requests") or {}
    rows = [{"reason": reason.replace("_", " "), "requests": int(n)}
            for reason, n in (requests.get("rejected_by_reason") or {}).items() if n]
    if requests.get("unfinished"):
        rows.append({"reason": "unfinished at window end", "requests": int(requests["unfinished"])})
    return pd.DataFrame(rows, columns=["reason", "requests"])


def pareto_front(df: pd.DataFrame, cost: str, latency: str) -> pd.Series:
    """True for rows no other row beats on both `cost` and `latency` (lower is better for both)."""
    order = df.sort_values([cost, latency]).index
    best = math.inf
    front = pd.Series(False, index=df.index)
    for i in order:
        value = df.at[i, latency]
        if pd.notna(value) and pd.notna(df.at[i, cost]) and value < best:
            front[i] = True
            best = value
    return front


def cheapest_meeting_slo(df: pd.DataFrame, cost: str, met: str = "slo_met") -> object | None:
    """Index of the cheapest row whose `met` column is True, or None."""
    if met not in df.columns or cost not in df.columns:
        return None
    ok = df[df[met].fillna(False).astype(bool) & df[cost].notna()]
    return None if ok.empty else ok[cost].idxmin()
