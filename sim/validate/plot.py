"""The validation chart (Altair): percentiles measured vs simulated, per-request error histograms, and error by
load. Written as `validation.html` (Vega-Lite from its CDN) and `validation.vl.json` (the spec, which the
dashboard renders offline with `st.vega_lite_chart` or `alt.Chart.from_dict`)."""
from __future__ import annotations

import json
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from sim.validate.compare import METRICS, STATS

LABELS = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_s": "E2E"}


def _percentile_frame(block: dict, label: str) -> pd.DataFrame:
    rows = []
    for m in METRICS:
        for s in STATS:
            v = block["metrics"][m][s]
            for side in ("measured", "simulated"):
                if v[side] is not None and np.isfinite(v[side]):
                    rows.append({"metric": LABELS[m], "stat": s, "side": f"{side} ({label})" if side == "simulated"
                                 else side, "ms": 1e3 * v[side]})
    return pd.DataFrame(rows)


def chart(blocks: dict[str, dict], per_request: pd.DataFrame, title: str) -> alt.VConcatChart:
    """`blocks`: comparison blocks by label (e.g. {"baseline": ..., "fitted": ...}) over the same requests;
    `per_request`: columns `metric`, `error_pct`, `label`, `measured_inflight`."""
    pct = pd.concat([_percentile_frame(b, k) for k, b in blocks.items()]).drop_duplicates()
    top = alt.Chart(pct).mark_point(filled=True, size=70).encode(
        x=alt.X("stat:N", sort=list(STATS), title=None), y=alt.Y("ms:Q", title="ms"),
        color=alt.Color("side:N", title=None), shape=alt.Shape("side:N", title=None),
        tooltip=["metric", "stat", "side", alt.Tooltip("ms:Q", format=".2f")],
    ).properties(width=180, height=160).facet(column=alt.Column("metric:N", title=None)).resolve_scale(y="independent")
    clipped = per_request.assign(error_pct=per_request["error_pct"].clip(-100, 100))
    hist = alt.Chart(clipped).mark_bar(opacity=0.6).encode(
        x=alt.X("error_pct:Q", bin=alt.Bin(step=5), title="per-request error, % (clipped to ±100)"),
        y=alt.Y("count():Q", title="requests", stack=None), color=alt.Color("label:N", title=None),
    ).properties(width=180, height=140).facet(column=alt.Column("metric:N", title=None)).resolve_scale(y="independent")
    load = alt.Chart(per_request).mark_boxplot(extent="min-max", size=14).encode(
        x=alt.X("measured_inflight:Q", bin=alt.Bin(maxbins=8), title="requests in flight at send (measured)"),
        y=alt.Y("error_pct:Q", title="error, %", scale=alt.Scale(domain=[-100, 100], clamp=True)),
        color=alt.Color("label:N", title=None),
    ).properties(width=180, height=140).facet(column=alt.Column("metric:N", title=None))
    return alt.vconcat(top, hist, load).properties(title=title)


def write_chart(out_dir: Path, blocks: dict[str, dict], per_request: pd.DataFrame, title: str) -> dict[str, str]:
    c = chart(blocks, per_request, title)
    html, spec = Path(out_dir) / "validation.html", Path(out_dir) / "validation.vl.json"
    c.save(str(html))
    spec.write_text(json.dumps(c.to_dict(), indent=None) + "\n")
    return {"html": str(html), "vega_lite": str(spec)}
