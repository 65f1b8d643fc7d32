"""Measured against simulated: percentiles, throughput, per-request error distributions, errors by load level.

Errors are percentages of the measured value: signed `100 (sim - measured) / measured` (positive: the simulator
is slower / predicts more) and absolute. Only requests completed in both are compared; the block says how many.
"""
from __future__ import annotations

import math

import numpy as np

from sim.validate.measured import MeasuredRun
from sim.validate.replay import Replay

METRICS = ("ttft_s", "tpot_s", "e2e_s")
STATS = ("p50", "p90", "p99", "mean")
# Load keys of the per-request table and validation.json `by_load` (docs/validation.md).
LOAD_KEYS = {
    "measured_inflight": "requests in flight at the server (measured) when the request was sent",
    "measured_rate_per_s": "measured send rate, requests/s in the 10 s window centred on the send",
    "sim_busy_fraction": "simulated fraction of the pool's instance-time spent in iterations, in the 1 s "
                         "interval of the arrival",
}


def summary_stats(values: np.ndarray) -> dict[str, float]:
    v = values[np.isfinite(values)]
    if not v.size:
        return dict.fromkeys(STATS, math.nan)
    p50, p90, p99 = np.percentile(v, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "mean": float(v.mean())}


def pct_error(sim: float, measured: float) -> float:
    if not (math.isfinite(sim) and math.isfinite(measured)) or measured == 0:
        return math.nan
    return 100.0 * (sim - measured) / measured


def versus(measured: float, simulated: float) -> dict:
    e = pct_error(simulated, measured)
    return {"measured": measured, "simulated": simulated, "error_pct": e, "abs_error_pct": abs(e)}


def throughput(send_s: np.ndarray, e2e_s: np.ndarray, output_tokens: np.ndarray) -> dict[str, float]:
    """Completed requests and output tokens per second over first send -> last completion (both sides alike)."""
    ok = np.isfinite(e2e_s)
    if not ok.any():
        return {"requests_per_s": math.nan, "output_tokens_per_s": math.nan}
    span = float(np.max(send_s[ok] + e2e_s[ok]) - np.min(send_s[ok]))
    span = max(span, 1e-9)
    return {"requests_per_s": float(ok.sum()) / span, "output_tokens_per_s": float(output_tokens[ok].sum()) / span}


def per_request_error_pct(measured: MeasuredRun, rep: Replay) -> dict[str, np.ndarray]:
    """Signed % error per request and metric [R] (NaN where either side has no value)."""
    out = {}
    for m in METRICS:
        meas, sim = getattr(measured, m), getattr(rep, m)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[m] = np.where(np.isfinite(meas) & np.isfinite(sim) & (meas > 0), 100.0 * (sim - meas) / meas, np.nan)
    return out


def load_levels(measured: MeasuredRun, rep: Replay) -> dict[str, np.ndarray]:
    """Per request [R]: the load keys of `LOAD_KEYS`."""
    a, end = measured.arrival_s, measured.arrival_s + measured.e2e_s
    starts, ends = np.sort(a), np.sort(end)
    inflight = np.searchsorted(starts, a, side="right") - np.searchsorted(ends, a, side="right")
    rate = (np.searchsorted(starts, a + 5.0, side="right") - np.searchsorted(starts, a - 5.0, side="left")) / 10.0
    return {"measured_inflight": inflight.astype(np.float64), "measured_rate_per_s": rate.astype(np.float64),
            "sim_busy_fraction": rep.busy_fraction}


def _edges(values: np.ndarray, key: str) -> np.ndarray:
    if key == "sim_busy_fraction":
        return np.array([0.0, 0.5, 0.8, 0.95, 1.0 + 1e-9])
    v = values[np.isfinite(values)]
    if not v.size:
        return np.array([0.0, 1.0])
    edges = np.unique(np.percentile(v, [0, 25, 50, 75, 100]))
    if edges.size == 1:
        edges = np.array([edges[0], edges[0] + 1e-9])
    edges[-1] += 1e-9
    return edges


def by_load(errors: dict[str, np.ndarray], loads: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, list[dict]]:
    """For each load key: buckets (quartiles of the measured keys; fixed bins of the busy fraction) with the
    request count and the median signed and mean absolute % error per metric."""
    out = {}
    for key, values in loads.items():
        rows = []
        edges = _edges(values[mask], key)
        for lo, hi in zip(edges[:-1], edges[1:]):
            sel = mask & (values >= lo) & (values < hi)
            row = {"lo": float(lo), "hi": float(hi), "requests": int(sel.sum())}
            for m in METRICS:
                e = errors[m][sel]
                e = e[np.isfinite(e)]
                row[f"{m}_median_error_pct"] = float(np.median(e)) if e.size else math.nan
                row[f"{m}_mean_abs_error_pct"] = float(np.mean(np.abs(e))) if e.size else math.nan
            rows.append(row)
        out[key] = rows
    return out


def compare(measured: MeasuredRun, rep: Replay, mask: np.ndarray | None = None, *, with_throughput: bool = True) -> dict:
    """The comparison block of validation.json over the rows in `mask` (all rows by default)."""
    mask = np.ones(len(measured), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    both = mask & rep.completed
    block: dict = {"requests": int(mask.sum()), "compared": int(both.sum()),
                   "not_completed_in_sim": {s: int((mask & (rep.status == s)).sum()) for s in ("rejected", "unfinished")}}
    metrics = {}
    for m in METRICS:
        meas, sim = summary_stats(getattr(measured, m)[both]), summary_stats(getattr(rep, m)[both])
        metrics[m] = {s: versus(meas[s], sim[s]) for s in STATS}
    if measured.itl_gaps_s is not None and measured.itl_gaps_s.size and rep.itl:
        # ITL: the log's pooled gaps against the simulation's (every delivery gap of the run; a sketch, so pooled,
        # not per request, and over all the run's requests rather than only those in `mask`).
        meas = summary_stats(measured.itl_gaps_s)
        metrics["itl_s"] = {s: versus(meas[s], float(rep.itl.get(s, math.nan))) for s in STATS}
    block["metrics"] = metrics
    if with_throughput:
        tm = throughput(measured.arrival_s[both], measured.e2e_s[both], measured.output_tokens[both])
        ts = throughput(rep.send_s[both], rep.e2e_s[both], measured.output_tokens[both])
        block["throughput"] = {k: versus(tm[k], ts[k]) for k in tm}
        block["throughput"]["log_reported"] = {k: v for k, v in measured.aggregates.items() if v is not None}
    errors = per_request_error_pct(measured, rep)
    dist = {}
    for m in METRICS:
        e = errors[m][both]
        e = e[np.isfinite(e)]
        if not e.size:
            dist[m] = dict.fromkeys(("p10", "p50", "p90", "mean", "mean_abs", "median_abs"), math.nan)
            continue
        p10, p50, p90 = np.percentile(e, [10, 50, 90])
        dist[m] = {"p10": float(p10), "p50": float(p50), "p90": float(p90), "mean": float(e.mean()),
                   "mean_abs": float(np.abs(e).mean()), "median_abs": float(np.median(np.abs(e)))}
    block["per_request_error_pct"] = dist
    block["by_load"] = by_load(errors, load_levels(measured, rep), both)
    return block
