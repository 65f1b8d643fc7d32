"""What a plan concludes from its outcomes: the chosen configuration, the next-cheaper one that fails and why,
and the cost-latency frontier. `plan_json` is the document written as `plan.json` (schema in docs/planning.md).
"""
from __future__ import annotations

from dataclasses import dataclass

from sim.plan.evaluate import Outcome
from sim.plan.redundancy import passes, run_meets
from sim.plan.slo import slo_checks
from sim.sweep import parse_overrides

SCHEMA = "inferplan.plan/1"
LATENCIES = ("ttft_p99_s", "tpot_p99_s")


def _metric(summary: dict | None, name: str) -> float | None:
    if not summary:
        return None
    if name in ("ttft_p99_s", "tpot_p99_s"):
        value = ((summary.get("latency_s") or {}).get(name.split("_")[0]) or {}).get("p99")
    else:
        value = (summary.get("cost") or {}).get(name)
    return None if value is None else float(value)


@dataclass(frozen=True)
class Row:
    """One evaluated configuration with the figures the plan ranks it by."""

    outcome: Outcome
    objective: float | None
    meets: bool

    @property
    def id(self) -> int:
        return self.outcome.id


def rank(outcomes: list[Outcome], objective: str) -> list[Row]:
    """Rows by objective, cheapest first; equal costs by P99 TTFT, then id; configurations without a cost last."""
    rows = [Row(o, _metric(o.summary, objective) if o.status == "completed" else None, passes(o)) for o in outcomes]

    def key(r: Row):
        ttft = _metric(r.outcome.summary, "ttft_p99_s")
        return (r.objective is None, r.objective or 0.0, ttft is None, ttft or 0.0, r.id)
    return sorted(rows, key=key)


def choose(rows: list[Row]) -> tuple[Row | None, Row | None]:
    """(cheapest row meeting every SLO, the most expensive failing row cheaper than it). Without a passing row:
    (None, None)."""
    chosen = next((r for r in rows if r.meets and r.objective is not None), None)
    if chosen is None:
        return None, None
    cheaper = [r for r in rows if not r.meets and r.objective is not None and r.objective < chosen.objective]
    return chosen, (cheaper[-1] if cheaper else None)


def pareto_ids(rows: list[Row], latency: str) -> list[int]:
    """Ids on the cost-latency frontier (no other row is at most as costly and as slow, and better in one),
    cheapest first."""
    pts = [(r.objective, _metric(r.outcome.summary, latency), r.id) for r in rows]
    pts = [p for p in pts if p[0] is not None and p[1] is not None]
    front, best = [], float("inf")
    for _cost, lat, rid in sorted(pts):
        if lat < best:
            front.append(rid)
            best = lat
    return front


def _fleet(summary: dict | None) -> dict:
    pools = (summary or {}).get("pools") or {}
    return {name: {"instances": p.get("instances_start"), "instances_max": p.get("instances_max"),
                   "hardware": p.get("hardware"), "model": p.get("model"), "weights_dtype": p.get("weights_dtype"),
                   "usd_per_instance_hour": p.get("usd_per_instance_hour"),
                   "pricing": ((summary or {}).get("pricing") or {}).get(name, {}).get("kind", "on_demand")}
            for name, p in pools.items()}


def _failure_run(o: Outcome | None, run_dir: str) -> dict | None:
    """A configuration's N+1 run (sim/plan/redundancy.py) as plan.json shows it; None without one."""
    if o is None:
        return None
    s = o.summary
    checks = slo_checks(s) if s else []
    return {"override_args": list(o.overrides), "status": o.status, "meets_slos": run_meets(o),
            "usd": _metric(s, "usd"), "ttft_p99_s": _metric(s, "ttft_p99_s"), "tpot_p99_s": _metric(s, "tpot_p99_s"),
            "served_fraction": ((s or {}).get("slo") or {}).get("served"),
            "failures": ((s or {}).get("failures") or {}).get("pools"),
            "requests_failed_over": ((s or {}).get("failures") or {}).get("requests_failed_over"),
            "slos": [c.to_json() for c in checks], "failed_slos": [c.to_json() for c in checks if not c.met],
            "run_dir": run_dir if o.run_dir is not None else "", "config_hash": o.key, "cached": o.cached,
            "error": o.error}


HOURS_PER_MONTH = 730.0  # 365 x 24 / 12


def monthly_usd(summary: dict | None) -> float | None:
    """The simulated window's bill at the same rate for a whole month (730 h): a projection that assumes the
    window's traffic all month long, so a peak window overstates a month that is mostly off-peak."""
    usd, dur = _metric(summary, "usd"), (summary or {}).get("simulated_duration_s")
    return None if usd is None or not dur else usd / dur * HOURS_PER_MONTH * 3600.0


def duration_words(duration_s: float) -> str:
    """A simulated span in words: `47-second`, `10-minute`, `2.5-hour`, `3.0-day`."""
    if duration_s < 120:
        return f"{duration_s:,.0f}-second"
    if duration_s < 3600:
        return f"{duration_s / 60:,.0f}-minute"
    return f"{duration_s / 3600:,.1f}-hour" if duration_s < 86400 else f"{duration_s / 86400:,.1f}-day"


def monthly_basis(summary: dict | None) -> str | None:
    """What `monthly_usd` assumes, in words. Under a day the simulated window is not a day's traffic curve, so the
    projection is only what that window's fleet would cost if it (and its traffic) ran all month."""
    dur = (summary or {}).get("simulated_duration_s")
    if not dur:
        return None
    if dur >= 86400:
        return f"the run's {duration_words(dur)} bill scaled to 730 h"
    return (f"if this {duration_words(dur)} window's fleet and traffic ran all 730 h of a month; a peak window "
            "overstates a month that is mostly off-peak")


def failure_run_dir(config_id: int) -> str:
    """Where a configuration's N+1 run is linked in the plan folder, relative to it."""
    return f"jobs/{config_id}_n_plus_1"


def entry(row: Row, run_dirs: dict[int, str]) -> dict:
    """A configuration as it appears in plan.json."""
    o = row.outcome
    s = o.summary
    checks = slo_checks(s) if s else []
    n1 = _failure_run(o.failure_run, failure_run_dir(o.id))
    # Failed checks of both runs; the N+1 run's marked `"run": "n+1"` (the console says "with one instance failed").
    failed = [c.to_json() for c in checks if not c.met] + [{**c, "run": "n+1"} for c in (n1 or {}).get("failed_slos", [])]
    return {
        "id": o.id, "overrides": parse_overrides(list(o.overrides)), "override_args": list(o.overrides),
        "status": o.status, "meets_slos": row.meets, "objective": row.objective,
        "usd": _metric(s, "usd"), "usd_per_million_output_tokens": _metric(s, "usd_per_million_output_tokens"),
        "node_hours": _metric(s, "node_hours"),
        "simulated_duration_s": (s or {}).get("simulated_duration_s"), "usd_per_month_projected": monthly_usd(s),
        "usd_per_month_basis": monthly_basis(s),
        "ttft_p99_s": _metric(s, "ttft_p99_s"), "tpot_p99_s": _metric(s, "tpot_p99_s"),
        "served_fraction": ((s or {}).get("slo") or {}).get("served"),
        "fleet": _fleet(s), "slos": [c.to_json() for c in checks],
        "failed_slos": failed, "n_plus_1": n1,
        "run_dir": run_dirs.get(o.id, ""), "config_hash": o.key, "cached": o.cached, "error": o.error,
    }


def plan_json(*, scenario: str, command: str, created: str, objective: str, base: list[str], dimensions: list[dict],
              rows: list[Row], jobs: dict, notes: list[str], run_dirs: dict[int, str],
              status: str = "completed") -> dict:
    chosen, cheaper = choose(rows)
    entries = {r.id: entry(r, run_dirs) for r in rows}
    return {
        "schema": SCHEMA, "status": status, "scenario": scenario, "created": created, "command": command,
        "objective": objective, "base_overrides": base, "search": dimensions, "jobs": jobs,
        "chosen": entries[chosen.id] if chosen else None,
        "next_cheaper_failing": entries[cheaper.id] if cheaper else None,
        "frontier": {lat: pareto_ids(rows, lat) for lat in LATENCIES},
        "configurations": [entries[r.id] for r in rows],
        "notes": notes,
    }
