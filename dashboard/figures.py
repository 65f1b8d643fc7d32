"""The charts of one run, shared by the Run page and the HTML report so both show the same thing.

`run_frames` does the expensive part once (read the tables, aggregate to chart size; the app caches it);
`run_charts` turns the frames into titled Altair charts, or a note saying why a chart is absent.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import altair as alt
import numpy as np
import pandas as pd

from dashboard import aggregate, charts
from dashboard.data import RunData, read_table
from sim.results.schema import REQUESTS, TIMESERIES

QUEUE_COLUMNS = {"queued": "Queued", "running": "Running"}
UTIL_COLUMNS = {"kv_utilization": "KV-cache utilisation", "busy_fraction": "Busy fraction"}


@dataclass(frozen=True)
class RunFrames:
    """Everything the run's charts need, already small (at most a few thousand rows each)."""

    load: pd.DataFrame | None = None  # t_s, series, value: arrival/completion rates and active instances
    queue: pd.DataFrame | None = None  # t_s, series, value (requests)
    utilization: pd.DataFrame | None = None  # t_s, series, value (%)
    states: pd.DataFrame | None = None  # t_s, pool, state, instances
    latency: pd.DataFrame | None = None  # t_s, metric, percentile, value_s
    latency_bucket_s: float = 1.0
    latency_source: str = ""
    breakdown: pd.DataFrame = field(default_factory=pd.DataFrame)
    costs: pd.DataFrame = field(default_factory=pd.DataFrame)
    unserved: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass(frozen=True)
class Figure:
    """A chart with its section title, or, when the data is missing, a note saying so."""

    title: str
    chart: alt.TopLevelMixin | None
    note: str = ""


def _latency_from_timeseries(ts: pd.DataFrame) -> pd.DataFrame:
    parts = []
    for metric, col in (("TTFT", "ttft_p99_s"), ("TPOT", "tpot_p99_s")):
        if col in ts:
            small = aggregate.downsample(ts.dropna(subset=[col]), {col: "max"})
            parts.append(pd.DataFrame({"t_s": small["t_s"], "metric": metric, "percentile": "P99",
                                       "value_s": small[col]}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def run_frames(run: RunData) -> RunFrames:
    """Read a run's tables (only the columns needed) and aggregate them for plotting."""
    summary = run.summary
    frames: dict = {"breakdown": aggregate.time_breakdown(summary), "costs": aggregate.pool_costs(summary),
                    "unserved": aggregate.not_served(summary)}
    ts = None
    if run.has("timeseries"):
        ts = read_table(run.path, "timeseries")
        frames["load"] = aggregate.arrivals_and_capacity(ts)
        frames["queue"] = aggregate.gauges(ts, QUEUE_COLUMNS)
        frames["utilization"] = aggregate.gauges(ts, UTIL_COLUMNS, scale=100.0)
    if run.has("pools"):
        frames["states"] = aggregate.pool_states(read_table(run.path, "pools"))
    duration = float(summary.get("simulated_duration_s") or (ts["t_s"].max() if ts is not None else 0) or 0)
    if run.has("requests"):
        req = read_table(run.path, "requests", ["first_token_s", "ttft_s", "finish_s", "tpot_s"])
        interval = aggregate.sample_interval_s(ts["t_s"]) if ts is not None and len(ts) else 1.0
        span = duration or float(np.nan_to_num(req["finish_s"].max(), nan=0.0))
        bucket = aggregate.nice_bucket_s(span, min_s=interval)
        frames.update(latency=aggregate.latency_over_time(req, bucket), latency_bucket_s=bucket,
                      latency_source=REQUESTS)
    elif ts is not None:
        frames.update(latency=_latency_from_timeseries(ts), latency_bucket_s=aggregate.sample_interval_s(ts["t_s"]),
                      latency_source=f"{TIMESERIES} (P99 only)")
    return RunFrames(**frames)


def _missing(table: str) -> str:
    return f"This run has no readable `{table}.parquet`, so this chart cannot be drawn."


def run_charts(run: RunData, frames: RunFrames) -> list[Figure]:
    """The run's charts in page order."""
    slo = run.summary.get("slo") or {}
    figs = []
    if frames.load is not None and not frames.load.empty:
        figs.append(Figure("Arrival rate against capacity", charts.arrivals_vs_capacity(frames.load)))
    else:
        figs.append(Figure("Arrival rate against capacity", None, _missing("timeseries")))
    if frames.states is not None and not frames.states.empty:
        figs.append(Figure("Instances per pool by state", charts.instance_states(frames.states)))
    else:
        figs.append(Figure("Instances per pool by state", None, _missing("pools")))
    if frames.queue is not None and not frames.queue.empty:
        figs.append(Figure("Queue length", charts.series_lines(frames.queue, "Requests (queued and running)", ",.0f")))
    if frames.utilization is not None and not frames.utilization.empty:
        figs.append(Figure("KV-cache utilisation and busy fraction", charts.series_lines(
            frames.utilization, "Percent of fleet capacity (%)", ",.1f")))
    if frames.latency is not None and not frames.latency.empty:
        figs.append(Figure("Latency over time", charts.latency_over_time(
            frames.latency, slo.get("ttft_p99_s"), slo.get("tpot_p99_s"), frames.latency_bucket_s),
            f"From {frames.latency_source}."))
    else:
        figs.append(Figure("Latency over time", None, "No request reached its first token in this run."
                           if run.has("requests") else _missing("requests")))
    if not frames.breakdown.empty:
        figs.append(Figure("Where the time goes", charts.time_breakdown(frames.breakdown)))
    else:
        figs.append(Figure("Where the time goes", None, "The summary has no per-pool `time_breakdown_s`."))
    if not frames.costs.empty and frames.costs["usd"].notna().any():
        figs.append(Figure("Cost by pool", charts.pool_cost(frames.costs)))
    if not frames.unserved.empty:
        figs.append(Figure("Requests not served, by reason", charts.not_served(frames.unserved)))
    else:
        figs.append(Figure("Requests not served, by reason", None,
                           "Every arrived request was served: none rejected, none left unfinished."))
    return figs


def overlay_frame(frames_by_run: dict[str, RunFrames]) -> pd.DataFrame:
    """Long form `t_s, series, value, run` of a few series of several runs, for a baseline-against-variant chart."""
    parts = []
    for run, frames in frames_by_run.items():
        if frames.load is not None:
            keep = frames.load[frames.load["series"].isin(["Arrivals (req/s)", "Active instances"])]
            parts.append(keep.assign(run=run))
        if frames.queue is not None:
            queued = frames.queue[frames.queue["series"] == "Queued"]
            parts.append(queued.assign(series="Queued requests", run=run))
        if frames.latency is not None and not frames.latency.empty:
            for metric in ("TTFT", "TPOT"):
                p99 = frames.latency[(frames.latency["metric"] == metric) & (frames.latency["percentile"] == "P99")]
                parts.append(pd.DataFrame({"t_s": p99["t_s"], "series": f"{metric} P99 (s)", "value": p99["value_s"],
                                           "run": run}))
    if not parts:
        return pd.DataFrame(columns=["t_s", "series", "value", "run"])
    return pd.concat(parts, ignore_index=True)
