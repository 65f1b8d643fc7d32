"""A month priced from the scenario's traffic curve, not from the simulated window x 730 h.

The simulated window (ten minutes of a flash sale, say) shows how many instances each pool needs at that window's
demand. The month follows the day's demand instead:

1. **Demand per hour of the day, per request class** (requests/s, the busiest minute of each hour): a `daily`
   part's curve (its `curve`, scaled by `mean_rate_per_s`/`peak_rate_per_s` as the traffic scales it, with its
   flash sales, placed on the day by `curve_start_s`); a `poisson` or `gamma` part at its `rate_per_s` every hour;
   any other part (sessions, traces, closed loops) at the rate the simulated run saw for its class, every hour.
2. **Each pool's share**: per class, the fraction of the run's requests the pool served (its route and spill-over
   as simulated).
3. **Per-instance capacity**: the pool's requests/s in the run's busiest minute over its active instances then
   (pools.parquet): what the simulated run showed one instance carry while the SLOs held (a lower bound on what
   it could carry: a lightly loaded pool is priced high).
4. **Instances per hour** = ceil(pool demand / capacity), floored at `min_instances` and capped at
   `max_instances`; a fixed-size pool keeps its count all day.
5. **The month** = 730 h: 30.42 such days, each instance-hour at the pool's simulated price (its pricing option:
   on-demand, reserved or spot).

`window_usd_per_month` keeps the old figure, labelled: what the month would cost if the window ran all month.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from scenarios.arrivals import flash_sale, rate_curve
from scenarios.arrivals.daily import shifted
from scenarios.arrivals.nhpp import cumulative_rate
from scenarios.config_reader import ConfigReader
from sim.results.schema import POOLS, REQUESTS

DAY_S = 86_400.0
HOURS_PER_DAY = 24
HOURS_PER_MONTH = 730.0         # 365 x 24 / 12
DAYS_PER_MONTH = HOURS_PER_MONTH / HOURS_PER_DAY   # 30.42
MINUTE_S = 60.0
CONSTANT_RATE_KINDS = ("poisson", "gamma")   # renewal processes at a constant `rate_per_s`
WHERE = "scenario traffic (the month's curve)"


def _daily_rate(part: dict):
    """Requests/s of a `daily` part at a time of day (s from 00:00), as `scenarios/arrivals/daily.py` builds it."""
    r = ConfigReader(part, file=WHERE, where=str(part.get("name", "traffic")))
    base = rate_curve.from_config(r.nested("curve"))
    offset = float(part.get("curve_start_s", 0.0))
    duration = float(part.get("duration_s", DAY_S))
    curve = shifted(base, offset)
    level = part.get("mean_rate_per_s") or part.get("peak_rate_per_s")
    if level:
        t, cum = cumulative_rate(curve, duration, 1.0)
        now = cum[-1] / duration if part.get("mean_rate_per_s") else float(np.max(curve(t)))
        curve = shifted(base, offset, float(level) / now)
    rate = flash_sale.with_flash_sales(curve, [flash_sale.read(s) for s in r.mapping_list("flash_sales", None)])
    return lambda t_day: rate(np.mod(np.asarray(t_day, dtype=np.float64) - offset, DAY_S))


def hourly_peaks(rate_at) -> np.ndarray:
    """[24] the busiest minute's rate in each hour of the day, of a rate function of the time of day."""
    t = np.arange(0.0, DAY_S, MINUTE_S)
    return np.asarray(rate_at(t), dtype=np.float64).reshape(HOURS_PER_DAY, -1).max(axis=1)


def class_demand(traffic: dict, observed_per_s: dict[str, float]) -> tuple[dict[str, np.ndarray], list[str]]:
    """{class: [24] requests/s} and how each part was read (one phrase per part)."""
    parts = traffic.get("parts") if traffic.get("kind") == "mix" else [traffic]
    demand: dict[str, np.ndarray] = {}
    how = []
    for part in parts or []:
        cls = str(part.get("request_class") or "default")
        name = part.get("name") or cls
        if part.get("kind") == "daily":
            hours = hourly_peaks(_daily_rate(part))
            how.append(f"{name}: its daily curve ({hours.min():.3g}-{hours.max():.3g} req/s by hour)")
        elif part.get("rate_per_s") is not None and part.get("kind") in CONSTANT_RATE_KINDS:
            hours = np.full(HOURS_PER_DAY, float(part["rate_per_s"]))
            how.append(f"{name}: constant {float(part['rate_per_s']):.3g} req/s all day")
        else:
            rate = observed_per_s.get(cls, 0.0)
            hours = np.full(HOURS_PER_DAY, rate)
            how.append(f"{name} ({part.get('kind')}): the simulated run's {rate:.3g} req/s, all day")
        demand[cls] = demand.get(cls, np.zeros(HOURS_PER_DAY)) + hours
    return demand, how


def pool_hours(demand_per_s: np.ndarray, capacity_per_s: float | None, fixed: int | None, floor: int,
               cap: int) -> np.ndarray:
    """[24] instances per hour: `fixed` all day, else ceil(demand / capacity) within [floor, cap]."""
    if fixed is not None:
        return np.full(HOURS_PER_DAY, fixed, dtype=np.int64)
    if not capacity_per_s:
        return np.full(HOURS_PER_DAY, floor, dtype=np.int64)
    need = np.ceil(np.asarray(demand_per_s) / capacity_per_s - 1e-9).astype(np.int64)
    return np.clip(need, floor, cap)


def month_usd(instances_by_hour: np.ndarray, usd_per_instance_hour: float) -> float:
    """A month of days like this one: 30.42 x the day's instance-hours x the price."""
    return float(np.sum(instances_by_hour)) * usd_per_instance_hour * DAYS_PER_MONTH


def _observed(run_dir: Path) -> tuple[list[dict], list[dict]]:
    import pyarrow.parquet as pq

    req = pq.read_table(run_dir / REQUESTS, columns=["arrival_s", "request_class", "pool"]).to_pylist()
    pools = pq.read_table(run_dir / POOLS, columns=["t_s", "pool", "active"]).to_pylist() \
        if (run_dir / POOLS).is_file() else []
    return req, pools


def _peak_capacity(times: np.ndarray, pool_rows: list[dict], fallback: int) -> tuple[float | None, float, int]:
    """(requests/s per instance, window start of the busiest minute, active instances then)."""
    if not times.size:
        return None, 0.0, 0
    start = float(times.min())
    bins = np.floor((times - start) / MINUTE_S).astype(np.int64)
    counts = np.bincount(bins)
    busiest = int(np.argmax(counts))
    lo, hi = start + busiest * MINUTE_S, start + (busiest + 1) * MINUTE_S
    active = [int(r["active"] or 0) for r in pool_rows if lo <= float(r["t_s"]) < hi]
    instances = max(active) if active and max(active) > 0 else fallback
    return float(counts[busiest]) / MINUTE_S / max(1, instances), lo, instances


def monthly_from_curve(config: dict, summary: dict, run_dir: Path, fixed_pools: set[str]) -> dict:
    """plan.json's `month`: per pool instances by hour and $/month, the fleet's total, and the assumptions."""
    req, pool_rows = _observed(Path(run_dir))
    arrivals = np.array([r["arrival_s"] for r in req], dtype=np.float64)
    span = float(arrivals.max() - arrivals.min()) if arrivals.size > 1 else 0.0
    by_class: dict[str, int] = {}
    for r in req:
        by_class[r["request_class"]] = by_class.get(r["request_class"], 0) + 1
    observed = {c: n / span for c, n in by_class.items()} if span > 0 else {}
    demand, how = class_demand(config["scenario"]["traffic"], observed)
    out_pools, total = {}, 0.0
    for name, spec in config["scenario"]["pools"].items():
        sim = (summary.get("pools") or {}).get(name) or {}
        price = float(sim.get("usd_per_instance_hour") or 0.0)
        mine = [r for r in req if r["pool"] == name]
        share = {c: sum(r["request_class"] == c for r in mine) / n for c, n in by_class.items() if n}
        pool_demand = sum((share.get(c, 0.0) * d for c, d in demand.items()), np.zeros(HOURS_PER_DAY))
        capacity, at_s, active = _peak_capacity(np.array([r["arrival_s"] for r in mine], dtype=np.float64),
                                                [r for r in pool_rows if r["pool"] == name],
                                                int(sim.get("instances_max") or spec.get("instances") or 1))
        fixed = int(spec.get("instances") or sim.get("instances_start") or 0) if name in fixed_pools else None
        floor = int(spec.get("min_instances") or 0)
        cap = int(spec.get("max_instances") or max(floor, int(spec.get("instances") or 1)))
        hours = pool_hours(pool_demand, capacity, fixed, max(floor, 0 if fixed is None else fixed), cap)
        usd = month_usd(hours, price)
        total += usd
        capped = bool(fixed is None and capacity and np.any(pool_demand / capacity > cap + 1e-9))
        out_pools[name] = {
            "instances_by_hour": [int(x) for x in hours], "demand_per_s_by_hour": [float(x) for x in pool_demand],
            "capacity_per_instance_per_s": capacity, "capacity_seen_at_s": at_s, "capacity_seen_instances": active,
            "fixed": fixed is not None, "min_instances": floor, "max_instances": cap,
            "usd_per_instance_hour": price,
            "pricing": ((summary.get("pricing") or {}).get(name) or {}).get("kind", "on_demand"),
            "instance_hours_per_day": int(np.sum(hours)), "usd_per_month": usd,
            "demand_above_max_instances": capped}
    dur = summary.get("simulated_duration_s") or 0.0
    window = (summary.get("cost") or {}).get("usd")
    return {
        "usd_per_month": total, "usd_per_hour_average": total / HOURS_PER_MONTH,
        "days_per_month": DAYS_PER_MONTH, "pools": out_pools, "traffic": how,
        "window_usd_per_month": (float(window) / dur * 3600.0 * HOURS_PER_MONTH) if window is not None and dur
        else None,
        "assumptions": [
            "every day of the month is the scenario's day: its daily curves (flash sales included, each day), "
            "constant parts at their rate all day",
            "each hour is sized for its busiest minute; a pool's instances per hour = ceil(its demand / the "
            "requests/s per instance the simulated run carried in its busiest minute while meeting the SLOs), "
            "floored at min_instances, capped at max_instances; fixed-size pools at their count all day",
            "a class's demand splits over pools as the simulated run routed it",
            "730 h (30.42 days) at each pool's simulated $/instance-hour (its pricing option); no scale-up lag, "
            "cold starts or partial hours",
        ],
        "assumptions_short": ["730 h: 30.42 days of the scenario's day;", "each hour sized for its busiest minute",
                              "at the run's requests/s per instance,", "within min/max_instances",
                              "(fixed pools fixed);", "the pools' simulated $/instance-hour"],
    }


def basis_words(month: dict) -> str:
    """One line: what the month figure is, for the console and the BOM."""
    pools = ", ".join(f"{n} {min(p['instances_by_hour'])}-{max(p['instances_by_hour'])}" for n, p in
                      month["pools"].items())
    return f"730 h: 30.42 days of the scenario's day, instances per hour following its demand: {pools} instances"
