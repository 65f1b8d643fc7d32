"""Altair charts of a run, a comparison and a calibration; every axis names its unit.

Builders take the small long-form frames of `aggregate.py` / `calibration.py` (never raw million-row tables) and
return a chart with a fixed pixel width, which the app stretches to its column and the report renders as SVG.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from dashboard.data import PARTIAL_MARK

WIDTH = 680
HEIGHT = 220
MAX_SCATTER_POINTS = 4000  # Altair embeds data inline; a scatter beyond this is thinned (evenly) before plotting
# Fit the width to the page, keep the plot height: Streamlit's default for single and layered charts ("fit") would
# squeeze axes, legend and title into `height` and leave a short chart a sliver.
FIT_WIDTH = alt.AutoSizeParams(type="fit-x", contains="padding")
SECONDS_AXIS = alt.Axis(format="~s")  # log-scale seconds with SI prefixes: 10µ, 1m, 0.1 (the title says "s")


def _time(df: pd.DataFrame, col: str = "t_s") -> tuple[pd.DataFrame, str]:
    """Copy of `df` with column `t` in a readable unit (s, min or h, by span) and the matching axis title."""
    span = float(df[col].max() - df[col].min()) if len(df) else 0.0
    unit, div = ("h", 3600.0) if span > 3 * 3600 else ("min", 60.0) if span > 300 else ("s", 1.0)
    out = df.copy()
    out["t"] = out[col] / div
    return out, f"Simulated time ({unit})"


def _thin(df: pd.DataFrame, limit: int = MAX_SCATTER_POINTS) -> pd.DataFrame:
    return df if len(df) <= limit else df.iloc[np.linspace(0, len(df) - 1, limit).astype(int)]


def arrivals_vs_capacity(long: pd.DataFrame) -> alt.LayerChart:
    """Arrival and completion rates (req/s, left axis) against active instances (right axis)."""
    df, t_title = _time(long)
    base = alt.Chart(df).encode(x=alt.X("t:Q", title=t_title))
    color = alt.Color("series:N", title=None, legend=alt.Legend(orient="top"))
    rates = base.transform_filter(alt.datum.series != "Active instances").mark_line(strokeWidth=1.5).encode(
        y=alt.Y("value:Q", title="Requests per second (req/s)"), color=color,
        tooltip=[alt.Tooltip("t:Q", title=t_title, format=",.1f"), "series:N",
                 alt.Tooltip("value:Q", title="req/s", format=",.2f")])
    instances = base.transform_filter(alt.datum.series == "Active instances").mark_line(
        interpolate="step-after", strokeDash=[4, 2]).encode(
        y=alt.Y("value:Q", title="Active instances", axis=alt.Axis(orient="right")), color=color,
        tooltip=[alt.Tooltip("t:Q", title=t_title, format=",.1f"),
                 alt.Tooltip("value:Q", title="instances", format=",.1f")])
    return alt.layer(rates, instances).resolve_scale(y="independent").properties(
        width=WIDTH, height=HEIGHT, autosize=FIT_WIDTH)


def series_lines(long: pd.DataFrame, y_title: str, y_format: str = ",.2f") -> alt.Chart:
    """One line per `series` over simulated time; `value` plotted against `y_title` (which carries the unit)."""
    df, t_title = _time(long)
    return alt.Chart(df).mark_line(strokeWidth=1.5).encode(
        x=alt.X("t:Q", title=t_title), y=alt.Y("value:Q", title=y_title),
        color=alt.Color("series:N", title=None, legend=alt.Legend(orient="top")),
        tooltip=[alt.Tooltip("t:Q", title=t_title, format=",.1f"), "series:N",
                 alt.Tooltip("value:Q", title=y_title, format=y_format)],
    ).properties(width=WIDTH, height=HEIGHT, autosize=FIT_WIDTH)


def instance_states(long: pd.DataFrame) -> alt.FacetChart:
    """Stacked instances per state (starting, active, draining) over time, one panel per pool."""
    df, t_title = _time(long)
    df["state"] = df["state"].astype(str)
    return alt.Chart(df).mark_area(interpolate="step-after", opacity=0.85).encode(
        x=alt.X("t:Q", title=t_title), y=alt.Y("instances:Q", stack=True, title="Instances"),
        color=alt.Color("state:N", title="State", sort=["starting", "active", "draining"],
                        scale=alt.Scale(domain=["starting", "active", "draining"],
                                        range=["#f2b447", "#4c78a8", "#b279a2"])),
        order=alt.Order("state:N"),
        tooltip=["pool:N", "state:N", alt.Tooltip("t:Q", title=t_title, format=",.1f"),
                 alt.Tooltip("instances:Q", format=",.1f")],
    ).properties(width=WIDTH, height=120).facet(row=alt.Row("pool:N", title="Pool"))


def _latency_panel(df: pd.DataFrame, metric: str, unit: str, scale: float, slo_s: float | None,
                   t_title: str) -> alt.Chart:
    sub = df[df["metric"] == metric].assign(value=lambda d: d["value_s"] * scale)
    y_title = f"{metric} ({unit})"
    lines = alt.Chart(sub).mark_line(point=len(sub) < 60, strokeWidth=1.5).encode(
        x=alt.X("t:Q", title=t_title), y=alt.Y("value:Q", title=y_title),
        color=alt.Color("percentile:N", title="Percentile", sort=["P50", "P90", "P99"]),
        tooltip=[alt.Tooltip("t:Q", title=t_title, format=",.1f"), "percentile:N",
                 alt.Tooltip("value:Q", title=y_title, format=",.3f")])
    layers = [lines]
    if slo_s is not None:
        rule = pd.DataFrame({"value": [slo_s * scale], "label": [f"SLO {slo_s * scale:g} {unit}"]})
        layers.append(alt.Chart(rule).mark_rule(strokeDash=[6, 3], color="#d62728").encode(
            y="value:Q", tooltip=alt.Tooltip("label:N", title="target")))
    return alt.layer(*layers).properties(width=WIDTH, height=HEIGHT - 40, title=f"{metric} percentiles over time")


def latency_over_time(long: pd.DataFrame, slo_ttft_s: float | None, slo_tpot_s: float | None,
                      bucket_s: float) -> alt.VConcatChart:
    """TTFT (s) and TPOT (ms) P50/P90/P99 per time bucket, each with its SLO as a dashed line."""
    df, t_title = _time(long)
    t_title = f"{t_title}, {bucket_s:g} s buckets"
    return alt.vconcat(_latency_panel(df, "TTFT", "s", 1.0, slo_ttft_s, t_title),
                       _latency_panel(df, "TPOT", "ms", 1e3, slo_tpot_s, t_title))


def time_breakdown(df: pd.DataFrame) -> alt.Chart:
    """Where each pool's iteration time went (s), stacked by category."""
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("seconds:Q", stack=True, title="Instance time in iterations (s)"),
        y=alt.Y("pool:N", title="Pool"), color=alt.Color("category:N", title="Category"),
        tooltip=["pool:N", "category:N", alt.Tooltip("seconds:Q", format=",.1f", title="time (s)")],
    ).properties(width=WIDTH, height=max(60, 36 * df["pool"].nunique()), autosize=FIT_WIDTH)


def pool_cost(df: pd.DataFrame) -> alt.Chart:
    """Cost per pool (USD) with node-hours in the tooltip."""
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("usd:Q", title="Cost (USD)"), y=alt.Y("pool:N", title="Pool"),
        tooltip=["pool:N", "hardware:N", "model:N", alt.Tooltip("usd:Q", format=",.2f", title="USD"),
                 alt.Tooltip("node_hours:Q", format=",.2f", title="node-hours")],
    ).properties(width=WIDTH, height=max(60, 36 * len(df)), autosize=FIT_WIDTH)


def not_served(df: pd.DataFrame) -> alt.Chart:
    """Requests not served, by reason."""
    return alt.Chart(df).mark_bar(color="#e45756").encode(
        x=alt.X("requests:Q", title="Requests not served", axis=alt.Axis(tickMinStep=1, format=",d")),
        y=alt.Y("reason:N", title="Reason", sort="-x"),
        tooltip=["reason:N", alt.Tooltip("requests:Q", format=",d")],
    ).properties(width=WIDTH, height=max(60, 30 * len(df)), autosize=FIT_WIDTH)


def short_label(label: str, limit: int = 32) -> str:
    """A point's name cut to `limit` characters; a partial run's mark is kept (the cut would drop it first)."""
    if len(label) <= limit:
        return label
    mark = PARTIAL_MARK if label.endswith(PARTIAL_MARK) else ""
    return label[:limit - len(mark) - 1] + "…" + mark


def pareto(df: pd.DataFrame, cost: str, cost_title: str, latency: str, latency_title: str,
           latency_scale: float = 1.0, slo: float | None = None) -> alt.Chart:
    """Cost against P99 latency per configuration: SLO verdict as colour, the Pareto frontier as a line and the
    cheapest configuration meeting the SLO ringed and labelled. `df` has `label`, `meets_slo`, `frontier`,
    `cheapest` and the two metric columns (latency in seconds, shown times `latency_scale`)."""
    d = df.assign(x=df[cost], y=df[latency] * latency_scale,
                  verdict=df["meets_slo"].map({True: "meets SLO", False: "misses SLO"}).fillna("no SLO"))
    tooltip = ["label:N", alt.Tooltip("x:Q", title=cost_title, format=",.3f"),
               alt.Tooltip("y:Q", title=latency_title, format=",.3f"), "verdict:N"]
    x = alt.X("x:Q", title=cost_title, scale=alt.Scale(zero=False), axis=alt.Axis(tickCount=8))
    y = alt.Y("y:Q", title=latency_title)
    points = alt.Chart(d).mark_circle(size=70, opacity=0.85).encode(
        x=x, y=y, tooltip=tooltip, color=alt.Color(
            "verdict:N", title="Verdict", scale=alt.Scale(domain=["meets SLO", "misses SLO", "no SLO"],
                                                          range=["#54a24b", "#e45756", "#9d9d9d"])))
    frontier = alt.Chart(d[d["frontier"]].sort_values("x")).mark_line(color="#4c78a8", strokeDash=[4, 2]).encode(
        x=x, y=y, order="x:Q")
    short = d.assign(short=d["label"].astype(str).map(short_label))
    names = alt.Chart(short).mark_text(align="left", dx=7, dy=8, fontSize=10, color="#444").encode(
        x=x, y=y, text="short:N")  # every point named (the full label in the tooltip)
    best = d[d["cheapest"]]
    layers = [frontier, points, names,
              alt.Chart(best).mark_point(size=320, shape="circle", strokeWidth=2.5, color="#222").encode(x=x, y=y),
              alt.Chart(best).mark_text(align="left", dx=12, dy=-10, fontWeight="bold").encode(
                  x=x, y=y, text=alt.value("cheapest meeting SLO"))]
    if slo is not None:
        layers.append(alt.Chart(pd.DataFrame({"y": [slo * latency_scale]})).mark_rule(
            strokeDash=[6, 3], color="#d62728").encode(y="y:Q"))
    return alt.layer(*layers).properties(width=WIDTH, height=320, autosize=FIT_WIDTH,
                                         title=f"Pareto frontier: {cost_title} against {latency_title}")


def metric_bars(long: pd.DataFrame) -> alt.FacetChart:
    """One small bar chart per metric (`metric` carries its unit) across configurations (`label`)."""
    # Every row labelled (Vega drops overlapping axis labels by default: every other row at a small step), and
    # each bar's value written at its end.
    y = alt.Y("label:N", title=None, sort=None, axis=alt.Axis(labelLimit=480, labelOverlap=False))
    bars = alt.Chart().mark_bar().encode(x=alt.X("value:Q", title=None), y=y, color=alt.Color("label:N", legend=None),
                                         tooltip=["label:N", "metric:N", alt.Tooltip("value:Q", format=",.3f")])
    values = alt.Chart().mark_text(align="left", dx=3, fontSize=10).encode(
        x="value:Q", y=y, text=alt.Text("value:Q", format=",.3~g"))
    return alt.layer(bars, values, data=long).properties(width=260, height=alt.Step(22)).facet(
        facet=alt.Facet("metric:N", title=None, sort=list(dict.fromkeys(long["metric"]))), columns=2,
    ).resolve_scale(x="independent").properties(title="Metrics per configuration")


def measured_vs_predicted(df: pd.DataFrame) -> alt.Chart:
    """Measured against fitted op times, log-log, with the y = x line; held-out points hollow."""
    d = _thin(df[(df["measured_s"] > 0) & (df["predicted_s"] > 0)].copy())
    d["set"] = d["held_out"].map({True: "held out", False: "fitted on"}) if "held_out" in d else "all"
    d["curve"] = d["op"] + (" / " + d["dtype"].astype(str) if "dtype" in d else "")
    lo, hi = float(min(d["measured_s"].min(), d["predicted_s"].min())), float(
        max(d["measured_s"].max(), d["predicted_s"].max()))
    diag = alt.Chart(pd.DataFrame({"v": [lo, hi]})).mark_line(color="#888", strokeDash=[4, 3]).encode(
        x=alt.X("v:Q", scale=alt.Scale(type="log")), y=alt.Y("v:Q", scale=alt.Scale(type="log")))
    pts = alt.Chart(d).mark_point(size=45, filled=True, opacity=0.8).encode(
        x=alt.X("measured_s:Q", scale=alt.Scale(type="log"), title="Measured op time (s)", axis=SECONDS_AXIS),
        y=alt.Y("predicted_s:Q", scale=alt.Scale(type="log"), title="Fitted (predicted) op time (s)",
                axis=SECONDS_AXIS),
        color=alt.Color("curve:N", title="Op / dtype"), shape=alt.Shape("set:N", title="Points"),
        tooltip=["op:N", "dtype:N", "shape:N", "set:N", alt.Tooltip("measured_s:Q", format=".3e"),
                 alt.Tooltip("predicted_s:Q", format=".3e")])
    return alt.layer(diag, pts).properties(width=WIDTH, height=360, autosize=FIT_WIDTH)


def roofline(points: pd.DataFrame, lines: pd.DataFrame) -> alt.Chart:
    """Achieved TFLOP/s against arithmetic intensity (FLOP/byte), log-log, under each format's roofline."""
    x = alt.X("intensity:Q", scale=alt.Scale(type="log"), title="Arithmetic intensity (FLOP/byte)")
    y = alt.Y("tflops:Q", scale=alt.Scale(type="log"), title="Achieved throughput (TFLOP/s)")
    layers = []
    if not lines.empty:
        layers.append(alt.Chart(lines).mark_line(strokeDash=[5, 3]).encode(
            x=x, y=y, detail="format:N", tooltip=["format:N", alt.Tooltip("tflops:Q", format=",.1f")]))
        ends = lines.sort_values("intensity").groupby("format").tail(1)
        layers.append(alt.Chart(ends).mark_text(align="right", dy=-8).encode(x=x, y=y, text="format:N"))
    layers.append(alt.Chart(_thin(points).assign(curve=lambda d: d["op"] + " / " + d["dtype"].astype(str)))
                  .mark_point(filled=True, size=45, opacity=0.8).encode(
        x=x, y=y, color=alt.Color("curve:N", title="Op / dtype"),
        tooltip=["op:N", "dtype:N", "shape:N", alt.Tooltip("intensity:Q", format=",.2f"),
                 alt.Tooltip("tflops:Q", format=",.2f", title="TFLOP/s")]))
    return alt.layer(*layers).properties(width=WIDTH, height=360, autosize=FIT_WIDTH)


def efficiency_curves(df: pd.DataFrame) -> alt.Chart:
    """The profile's efficiency knots per (op, dtype) against the op's roofline time."""
    d = df.assign(curve=df["op"] + " / " + df["dtype"])
    return alt.Chart(d).mark_line(point=True).encode(
        x=alt.X("roofline_s:Q", scale=alt.Scale(type="log"), title="Roofline time of the op (s)", axis=SECONDS_AXIS),
        y=alt.Y("efficiency:Q", title="Efficiency (roofline time / measured time)"),
        color=alt.Color("curve:N", title="Op / dtype"),
        tooltip=["curve:N", alt.Tooltip("roofline_s:Q", format=".3e"), alt.Tooltip("efficiency:Q", format=".3f"),
                 alt.Tooltip("launch_s:Q", format=".2e", title="launch (s)")],
    ).properties(width=WIDTH, height=300, autosize=FIT_WIDTH, title="Efficiency curves (knots)")


def overlay(long: pd.DataFrame) -> alt.FacetChart:
    """Baseline against what-if over time: one panel per `series` (which names its unit), colour = `run`."""
    df, t_title = _time(long)
    return alt.Chart(df).mark_line(strokeWidth=1.5).encode(
        x=alt.X("t:Q", title=t_title), y=alt.Y("value:Q", title=None),
        color=alt.Color("run:N", title="Run", legend=alt.Legend(orient="top")),
        tooltip=["run:N", "series:N", alt.Tooltip("t:Q", title=t_title, format=",.1f"),
                 alt.Tooltip("value:Q", format=",.3f")],
    ).properties(width=WIDTH, height=140).facet(
        row=alt.Row("series:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")),
    ).resolve_scale(y="independent").properties(title="Baseline against what-if")
