"""Key figures of a run and their SLO verdicts, from `summary.json` (see `docs/results.md`).

`flatten_summary` gives the flat metric names a comparison uses (the same names `sweep.parquet` carries:
`ttft_p99_s`, `attainment`, `usd_per_million_output_tokens`, ...); `kpis` gives the labelled, unit-carrying figures
the Run page, the What-if page and the HTML report show. Values stay in seconds; `Kpi.scale` converts for display.
"""
from __future__ import annotations

from dataclasses import dataclass

from sim.results.flat import flatten_summary  # the sweep.parquet contract, shared with sim.sweep

LATENCIES = ("ttft", "tpot", "e2e")
STATS = ("p50", "p90", "p99", "mean")
SLO_TARGETS = ("ttft_p99_s", "tpot_p99_s", "served_fraction")




@dataclass(frozen=True)
class Kpi:
    """One headline figure. `value` and `target` are in the metric's own unit (seconds, fraction, USD)."""

    key: str  # flat metric name
    label: str
    unit: str  # display unit
    scale: float  # display value = value * scale
    digits: int
    lower_is_better: bool
    value: float | None = None
    target: float | None = None
    met: bool | None = None  # SLO verdict; None when the figure has no target

    def show(self, value: float | None = None) -> str:
        v = self.value if value is None else value
        return "n/a" if v is None else f"{v * self.scale:,.{self.digits}f} {self.unit}".strip()

    def show_target(self) -> str:
        if self.target is None:
            return ""
        return ("≤ " if self.lower_is_better else "≥ ") + self.show(self.target)


# key, label, display unit, scale, digits, lower is better, SLO target key, verdict key in slo.met
_KPI_TABLE = (
    ("ttft_p50_s", "TTFT P50", "s", 1.0, 3, True, None, None),
    ("ttft_p99_s", "TTFT P99", "s", 1.0, 3, True, "slo_ttft_p99_s", "ttft_p99"),
    ("tpot_p50_s", "TPOT P50", "ms", 1e3, 1, True, None, None),
    ("tpot_p99_s", "TPOT P99", "ms", 1e3, 1, True, "slo_tpot_p99_s", "tpot_p99"),
    ("attainment", "SLO attainment", "%", 100.0, 2, False, None, None),
    ("served_fraction", "Served", "%", 100.0, 3, False, "slo_served_fraction", "served_fraction"),
    ("requests_per_s", "Throughput", "req/s", 1.0, 2, False, None, None),
    ("output_tokens_per_s", "Output tokens", "tok/s", 1.0, 0, False, None, None),
    ("usd_per_million_output_tokens", "Cost per 1M output tokens", "USD", 1.0, 2, True, None, None),
    ("usd", "Total cost", "USD", 1.0, 2, True, None, None),
    ("node_hours", "Node-hours", "h", 1.0, 2, True, None, None),
)


def kpis(summary: dict) -> list[Kpi]:
    """The headline figures of a run, with target and verdict where the scenario sets an SLO on them.

    The verdict is the simulator's own (`slo.met`) when present, else recomputed from value and target.
    """
    flat = flatten_summary(summary)
    out = []
    for key, label, unit, scale, digits, lower, target_key, met_key in _KPI_TABLE:
        value = flat.get(key)
        target = flat.get(target_key) if target_key else None
        met = flat.get(f"slo_met_{met_key}") if met_key else None
        if met is None and target is not None and value is not None:
            met = value <= target if lower else value >= target
        out.append(Kpi(key, label, unit, scale, digits, lower, value, target, met))
    return out


def slo_rows(summary: dict) -> list[dict]:
    """The SLO verdict table: one row per figure with a target."""
    return [{"SLO": k.label, "target": k.show_target(), "achieved": k.show(),
             "verdict": "n/a" if k.met is None else ("met" if k.met else "missed")}
            for k in kpis(summary) if k.target is not None]


def overall_verdict(summary: dict) -> bool | None:
    """True when every SLO is met, False when any is missed, None when the run states no SLO."""
    verdicts = [k.met for k in kpis(summary) if k.met is not None]
    return all(verdicts) if verdicts else None


def relative_delta(new: float | None, base: float | None) -> float | None:
    """(new - base) / |base|, or None when undefined."""
    if new is None or base is None or base == 0:
        return None
    return (new - base) / abs(base)


def delta_rows(base: dict, new: dict) -> list[dict]:
    """Baseline against a variant, figure by figure: both values, the relative change and the variant's verdict."""
    rows = []
    for b, n in zip(kpis(base), kpis(new)):
        rel = relative_delta(n.value, b.value)
        rows.append({"figure": b.label, "baseline": b.show(), "what-if": n.show(),
                     "change": "n/a" if rel is None else f"{rel:+.1%}",
                     "SLO": "" if n.met is None else ("met" if n.met else "missed")})
    return rows
