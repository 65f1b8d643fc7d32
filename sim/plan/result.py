"""What a plan concludes from its outcomes: the chosen configuration, the next-cheaper one that fails and why,
and the cost-latency frontier. `plan_json` is the document written as `plan.json` (schema in docs/planning.md).
"""
from __future__ import annotations

from dataclasses import dataclass

from sim.plan.evaluate import Outcome
from sim.plan.month import basis_words
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
    meets: bool                  # the plan's criterion: every SLO at its confidence (with the N+1 run if asked)
    meets_point: bool = False    # every SLO at the point estimate

    @property
    def id(self) -> int:
        return self.outcome.id


def rank(outcomes: list[Outcome], objective: str, bands=None) -> list[Row]:
    """Rows by objective, cheapest first; equal costs by P99 TTFT, then id; configurations without a cost last.
    `bands` (confidence.Bands): a row meets when every latency within its band meets; None: the point estimate."""
    rows = [Row(o, _metric(o.summary, objective) if o.status == "completed" else None, passes(o, bands), passes(o))
            for o in outcomes]

    def key(r: Row):
        ttft = _metric(r.outcome.summary, "ttft_p99_s")
        return (r.objective is None, r.objective or 0.0, ttft is None, ttft or 0.0, r.id)
    return sorted(rows, key=key)


def choose(rows: list[Row], exclude=frozenset()) -> tuple[Row | None, Row | None]:
    """(cheapest row meeting every SLO, the most expensive failing row cheaper than it); rows in `exclude` (ids
    passed over on the seeds) count as neither. Without a passing row: (None, None)."""
    rows = [r for r in rows if r.id not in exclude]
    chosen = next((r for r in rows if r.meets and r.objective is not None), None)
    if chosen is None:
        return None, None
    cheaper = [r for r in rows if not r.meets and r.objective is not None and r.objective < chosen.objective]
    return chosen, (cheaper[-1] if cheaper else None)


def choose_point(rows: list[Row]) -> Row | None:
    """The cheapest row meeting every SLO at the point estimate."""
    return next((r for r in rows if r.meets_point and r.objective is not None), None)


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


def _failure_run(o: Outcome | None, run_dir: str, bands=None) -> dict | None:
    """A configuration's N+1 run (sim/plan/redundancy.py) as plan.json shows it; None without one."""
    if o is None:
        return None
    s = o.summary
    checks = slo_checks(s, o.config, bands) if s else []
    return {"override_args": list(o.overrides), "status": o.status, "meets_slos": run_meets(o, bands),
            "meets_at_point_estimate": run_meets(o),
            "usd": _metric(s, "usd"), "ttft_p99_s": _metric(s, "ttft_p99_s"), "tpot_p99_s": _metric(s, "tpot_p99_s"),
            "served_fraction": ((s or {}).get("slo") or {}).get("served"),
            "failures": ((s or {}).get("failures") or {}).get("pools"),
            "requests_failed_over": ((s or {}).get("failures") or {}).get("requests_failed_over"),
            "slos": [c.to_json() for c in checks],
            "failed_slos": [c.to_json() for c in checks if not c.met_at_confidence],
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


def usd_per_hour(summary: dict | None) -> float | None:
    """The simulated window's bill per hour (its cost over its simulated span)."""
    usd, dur = _metric(summary, "usd"), (summary or {}).get("simulated_duration_s")
    return None if usd is None or not dur else usd / dur * 3600.0


def entry(row: Row, run_dirs: dict[int, str], bands=None, month: dict | None = None,
          seeds: dict | None = None) -> dict:
    """A configuration as it appears in plan.json. `month`: its month from the traffic curve (month.py), which
    becomes `usd_per_month_projected`; without one the window's rate x 730 h stays (labelled in the basis)."""
    o = row.outcome
    s = o.summary
    checks = slo_checks(s, o.config, bands) if s else []
    n1 = _failure_run(o.failure_run, failure_run_dir(o.id), bands)
    # Failed checks of both runs (at the plan's confidence); the N+1 run's marked `"run": "n+1"`.
    failed = ([c.to_json() for c in checks if not c.met_at_confidence]
              + [{**c, "run": "n+1"} for c in (n1 or {}).get("failed_slos", [])])
    projected = month["usd_per_month"] if month else monthly_usd(s)
    return {
        "id": o.id, "overrides": parse_overrides(list(o.overrides)), "override_args": list(o.overrides),
        "status": o.status, "meets_slos": row.meets, "meets_at_confidence": row.meets,
        "meets_at_point_estimate": row.meets_point, "objective": row.objective,
        "usd": _metric(s, "usd"), "usd_per_million_output_tokens": _metric(s, "usd_per_million_output_tokens"),
        "node_hours": _metric(s, "node_hours"), "usd_per_hour": usd_per_hour(s),
        "simulated_duration_s": (s or {}).get("simulated_duration_s"), "usd_per_month_projected": projected,
        "usd_per_month_basis": basis_words(month) if month else monthly_basis(s),
        "usd_per_month_if_window_ran_all_month": monthly_usd(s), "month": month, "seeds": seeds,
        "ttft_p99_s": _metric(s, "ttft_p99_s"), "tpot_p99_s": _metric(s, "tpot_p99_s"),
        "served_fraction": ((s or {}).get("slo") or {}).get("served"),
        "fleet": _fleet(s), "slos": [c.to_json() for c in checks],
        "failed_slos": failed, "n_plus_1": n1,
        "run_dir": run_dirs.get(o.id, ""), "config_hash": o.key, "cached": o.cached, "error": o.error,
    }


def confidence_cost(chosen: dict | None, point: dict | None) -> tuple[float | None, float | None]:
    """($/h, $/month) the confidence costs: the chosen configuration's minus the point-estimate choice's ($/h: the
    simulated window's bill per hour; $/month: from the traffic curve)."""
    if not chosen or not point:
        return None, None
    per_h = (None if chosen["usd_per_hour"] is None or point["usd_per_hour"] is None
             else chosen["usd_per_hour"] - point["usd_per_hour"])
    a, b = chosen.get("usd_per_month_projected"), point.get("usd_per_month_projected")
    return per_h, (None if a is None or b is None else a - b)


def plan_json(*, scenario: str, command: str, created: str, objective: str, base: list[str], dimensions: list[dict],
              rows: list[Row], jobs: dict, notes: list[str], run_dirs: dict[int, str],
              status: str = "completed", bands=None, months: dict[int, dict] | None = None,
              seeds: dict[int, dict] | None = None, passed_over: frozenset[int] | set[int] = frozenset(),
              seeds_asked: int = 1) -> dict:
    """plan.json. `bands`: the confidence (None: point estimate); `months` and `seeds` by configuration id;
    `passed_over`: ids that met on the base seed but not on the others (seeds.py)."""
    chosen, cheaper = choose(rows, passed_over)
    point = choose_point(rows)
    months, seeds = months or {}, seeds or {}
    entries = {r.id: entry(r, run_dirs, bands, months.get(r.id), seeds.get(r.id)) for r in rows}
    c_doc = entries[chosen.id] if chosen else None
    p_doc = entries[point.id] if point else None
    per_h, per_month = confidence_cost(c_doc, p_doc)
    return {
        "schema": SCHEMA, "status": status, "scenario": scenario, "created": created, "command": command,
        "objective": objective, "base_overrides": base, "search": dimensions, "jobs": jobs,
        "confidence": None if bands is None else {
            "level": bands.confidence, "source": "sim/validate/data/silicon_error_bands.json",
            "applied": "latency x max(1, the level's quantile of measured/simulated of the nearest partition)",
            "assumption": "the matrix compares medians; applying its ratio to a P99 is an assumption"},
        "chosen": c_doc,
        "point_estimate_choice": p_doc,
        "confidence_cost_usd_per_hour": per_h, "confidence_cost_usd_per_month": per_month,
        "seeds": {"count": seeds_asked, "passed_over": sorted(passed_over)},
        "next_cheaper_failing": entries[cheaper.id] if cheaper else None,
        "frontier": {lat: pareto_ids(rows, lat) for lat in LATENCIES},
        "configurations": [entries[r.id] for r in rows],
        "notes": notes,
    }
