"""A run's `summary.json` as flat metric columns: the contract between `sweep.parquet` (written by `sim.sweep`)
and the dashboard's Compare page (docs/dashboard.md, "Sweep columns the Compare page understands"). It lives in
the shared base so both sides use the one definition.

Only names the Compare page knows as metrics are produced: any other column of `sweep.parquet` would be taken for an
override and label the rows.
"""
from __future__ import annotations

import math

LATENCIES = ("ttft", "tpot", "e2e")
STATS = ("p50", "p90", "p99", "mean")
THROUGHPUT = ("requests_per_s", "input_tokens_per_s", "output_tokens_per_s")
COSTS = ("usd", "usd_per_million_output_tokens", "usd_per_million_input_tokens", "device_hours", "node_hours",
         "usd_per_request",
         "idle_waste_usd", "energy_kwh", "margin_usd")
SLO_TARGETS = ("ttft_p99_s", "tpot_p99_s", "served_fraction")
STATUSES = ("arrived", "completed", "rejected", "unfinished")


def _num(value) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def flatten_summary(summary: dict) -> dict:
    """`{metric: value}`: `requests_<status>`, `<ttft|tpot|e2e>_<p50|p90|p99|mean>_s`, throughput, `attainment`,
    `goodput_requests_per_s`, `served_fraction` (achieved), `slo_<target>` (targets), `slo_met_<verdict>` and
    `slo_met` (every verdict, per-class ones included), the cost figures, `simulated_duration_s`, `wall_time_s`,
    `cost_model_kind`. Figures the summary lacks (or that are NaN) are left out."""
    flat: dict = {"scenario": summary.get("scenario"), "seed": summary.get("seed"),
                  "simulated_duration_s": _num(summary.get("simulated_duration_s")),
                  "wall_time_s": _num(summary.get("wall_time_s"))}
    requests = summary.get("requests") or {}
    for status in STATUSES:
        flat[f"requests_{status}"] = _num(requests.get(status))
    latency = summary.get("latency_s") or {}
    for metric in LATENCIES:
        for stat in STATS:
            flat[f"{metric}_{stat}_s"] = _num((latency.get(metric) or {}).get(stat))
    throughput = summary.get("throughput") or {}
    for key in THROUGHPUT:
        flat[key] = _num(throughput.get(key))
    slo = summary.get("slo") or {}
    flat["attainment"] = _num(slo.get("attainment"))
    flat["goodput_requests_per_s"] = _num(slo.get("goodput_requests_per_s"))
    for target in SLO_TARGETS:
        flat[f"slo_{target}"] = _num(slo.get(target))
    arrived, completed = flat["requests_arrived"], flat["requests_completed"]
    flat["served_fraction"] = completed / arrived if arrived and completed is not None else None
    met = dict(slo.get("met") or {})
    for cls, verdicts in (slo.get("classes") or {}).items():
        for name, verdict in (verdicts.get("met") or {}).items():
            met[f"{cls}_{name}"] = verdict
    for name, verdict in met.items():
        flat[f"slo_met_{name}"] = bool(verdict)
    flat["slo_met"] = all(bool(v) for v in met.values()) if met else None
    cost = summary.get("cost") or {}
    for key in COSTS:
        flat[key] = _num(cost.get(key))
    flat["cost_model_kind"] = (summary.get("cost_model") or {}).get("kind")
    return {k: v for k, v in flat.items() if v is not None}


# Every name `flatten_summary` can produce except the per-verdict `slo_met_<...>` columns: what a table of runs
# (sweep.parquet, the Compare page) treats as a metric rather than an override.
METRIC_NAMES = frozenset({"scenario", "seed", "simulated_duration_s", "wall_time_s",
                          *(f"requests_{s}" for s in STATUSES),
                          *(f"{m}_{s}_s" for m in LATENCIES for s in STATS), *THROUGHPUT,
                          "attainment", "goodput_requests_per_s", "served_fraction", "slo_met",
                          *(f"slo_{t}" for t in SLO_TARGETS), *COSTS, "cost_model_kind"})
