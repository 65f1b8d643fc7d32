"""Predicted against measured (Altair, log-log, one colour per engine, TTFT and TPOT side by side, y = x drawn):
`matrix.html` (Vega from its CDN), `matrix.svg` (rendered offline by vl-convert) and `matrix.vl.json` (the spec;
the dashboard's Calibration page renders it with `st.vega_lite_chart`)."""
from __future__ import annotations

import json
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

LABELS = {"ttft": "TTFT", "tpot": "TPOT"}


def points(records: list[dict]) -> pd.DataFrame:
    """One point per simulated row and metric: `metric, engine, measured_ms, simulated_ms, error_pct, ...`."""
    out = []
    for r in records:
        if r["status"] != "simulated":
            continue
        for m, label in LABELS.items():
            meas, sim = 1e3 * float(r[f"measured_{m}_s"]), 1e3 * float(r[f"sim_{m}_p50_s"])
            if np.isfinite(sim) and sim > 0 and meas > 0:
                out.append({"metric": label, "engine": r["engine"], "measured_ms": meas, "simulated_ms": sim,
                            "error_pct": float(r[f"{m}_error_pct"]), "id": r["id"], "system": r["system"],
                            "model": r["model"], "shape": r["shape"], "clients": int(r["clients"])})
    return pd.DataFrame(out, columns=["metric", "engine", "measured_ms", "simulated_ms", "error_pct", "id", "system",
                                      "model", "shape", "clients"])


def _panel(df: pd.DataFrame, metric: str) -> alt.LayerChart:
    d = df[df["metric"] == metric]
    lo = float(min(d["measured_ms"].min(), d["simulated_ms"].min())) / 1.2
    hi = float(max(d["measured_ms"].max(), d["simulated_ms"].max())) * 1.2
    scale = alt.Scale(type="log", domain=[lo, hi])
    dots = alt.Chart(d).mark_circle(size=28, opacity=0.7).encode(
        x=alt.X("measured_ms:Q", scale=scale, title=f"{metric} measured, ms"),
        y=alt.Y("simulated_ms:Q", scale=scale, title=f"{metric} simulated median, ms"),
        color=alt.Color("engine:N", title="engine"),
        tooltip=["id", "system", "engine", "model", "shape", "clients", alt.Tooltip("measured_ms:Q", format=".2f"),
                 alt.Tooltip("simulated_ms:Q", format=".2f"), alt.Tooltip("error_pct:Q", format="+.1f")])
    diag = alt.Chart(pd.DataFrame({"measured_ms": [lo, hi], "simulated_ms": [lo, hi]})).mark_line(
        color="gray", strokeDash=[4, 4]).encode(x=alt.X("measured_ms:Q", scale=scale),
                                                y=alt.Y("simulated_ms:Q", scale=scale))
    return alt.layer(diag, dots).properties(width=300, height=300, title=metric)


def chart(df: pd.DataFrame, title: str) -> alt.HConcatChart:
    """One log-log panel per metric present in `df` (y = x dashed)."""
    return alt.hconcat(*[_panel(df, m) for m in LABELS.values() if (df["metric"] == m).any()]).properties(title=title)


def write_chart(out_dir: Path, records: list[dict], title: str) -> dict[str, str]:
    """Write the chart files; returns their paths (no chart when no row was simulated)."""
    df = points(records)
    if df.empty:
        return {}
    c = chart(df, title)
    out_dir = Path(out_dir)
    files = {"chart_html": out_dir / "matrix.html", "chart_svg": out_dir / "matrix.svg",
             "chart_vega_lite": out_dir / "matrix.vl.json"}
    c.save(str(files["chart_html"]))
    c.save(str(files["chart_svg"]))
    files["chart_vega_lite"].write_text(json.dumps(c.to_dict()) + "\n")
    return {k: str(v) for k, v in files.items()}
