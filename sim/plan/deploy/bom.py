"""The bill of materials of the chosen fleet: devices by type, nodes, $/h at the simulated starting size and at its
peak, and the monthly cost.

The month is 730 h. From a plan, it is priced from the scenario's traffic curve (sim/plan/month.py: each pool's
instances per hour follow the day's demand; plan.json `chosen.month`), with its assumptions beside the number.
The simulated run's bill scaled to 730 h stays only as a labelled line, `if_the_window_ran_all_month`: a run that
covers less than a day is not a day's traffic curve, so that figure is what the window's fleet would cost if it
(and its traffic) ran all month. Without a plan's month (the files built from a run alone) that line is the
monthly figure, with the same caveat.
"""
from __future__ import annotations

import math

from sim.plan.deploy.kubernetes import GPU_PRODUCTS
from sim.plan.deploy.source import PoolServing
from sim.plan.result import duration_words
from sim.results.schema import SUMMARY

HOURS_PER_MONTH = 730.0   # 365 x 24 / 12


def nodes_for(s: PoolServing, instances: int) -> int:
    """Nodes `instances` instances occupy: whole nodes per instance when one spans nodes, else instances packed
    `devices_per_node // devices` to a node (assumption: the scheduler packs pods of one pool together)."""
    if instances <= 0:
        return 0
    if s.nodes_per_instance > 1:
        return instances * s.nodes_per_instance
    per_node = max(1, s.hardware.devices_per_node // max(1, s.devices))
    return math.ceil(instances / per_node)


def pool_bom(s: PoolServing, simulated: dict | None) -> dict:
    peak = int((simulated or {}).get("instances_max", s.instances))
    out = {
        "hardware": s.hardware.name, "device_kind": s.hardware.kind,
        "gpu_product_label": GPU_PRODUCTS.get(s.hardware.name),
        "devices_per_instance": s.devices, "devices_per_node": s.hardware.devices_per_node,
        "nodes_per_instance": s.nodes_per_instance,
        "instances": {"start": s.instances, "simulated_peak": peak, "min": s.min_instances, "max": s.max_instances},
        "devices": {"start": s.instances * s.devices, "simulated_peak": peak * s.devices,
                    "max": s.max_instances * s.devices},
        "nodes": {"start": nodes_for(s, s.instances), "simulated_peak": nodes_for(s, peak),
                  "max": nodes_for(s, s.max_instances)},
        "usd_per_instance_hour": s.usd_per_instance_hour,
        "usd_per_hour": {"start": s.instances * s.usd_per_instance_hour,
                         "simulated_peak": peak * s.usd_per_instance_hour},
    }
    if simulated:
        out["simulated"] = {"billed_instance_hours": simulated.get("billed_instance_hours"),
                            "usd": simulated.get("usd")}
    return out


def monthly(summary: dict | None, fleet_usd_per_hour_start: float, fleet_usd_per_hour_peak: float,
            curve: bool = False) -> dict:
    """The monthly figures with their basis in words (`curve`: beside a month priced from the traffic curve)."""
    out = {"hours_per_month": HOURS_PER_MONTH,
           "usd_fleet_at_start_size_all_month": fleet_usd_per_hour_start * HOURS_PER_MONTH,
           "usd_fleet_at_simulated_peak_all_month": fleet_usd_per_hour_peak * HOURS_PER_MONTH}
    dur = (summary or {}).get("simulated_duration_s")
    usd = ((summary or {}).get("cost") or {}).get("usd")
    if not dur or usd is None:
        out["basis"] = "no simulated run given: fleet size x $/h x 730 h only"
        return out
    out["usd_from_simulated_run"] = usd / dur * 3600.0 * HOURS_PER_MONTH
    if dur >= 86400:
        out["basis"] = (f"the run's ${usd:,.2f} over its {duration_words(dur)} simulated span "
                        f"({dur:,.0f} s), scaled to 730 h")
    else:
        out["basis"] = (f"the run's ${usd:,.2f} over {dur:,.0f} s, scaled to 730 h")
        out["caveat"] = (f"the run covers a {duration_words(dur)} window, less than a day: this is what that "
                         "window's fleet would cost if it and its traffic ran all month. A peak window overstates "
                         "a month that is mostly off-peak; an off-peak one understates it."
                         + ("" if curve else " Plan a whole day (or the scenario's daily curve) to price a month."))
    return out


def curve_monthly(month: dict, window: dict) -> dict:
    """The monthly figures from a plan's month (sim/plan/month.py), the window x 730 h line labelled beside."""
    from sim.plan.month import basis_words

    return {"usd_per_month": month["usd_per_month"], "usd_per_hour_average": month["usd_per_hour_average"],
            "basis": "from the traffic curve: " + basis_words(month), "assumptions": month["assumptions"],
            "traffic": month["traffic"],
            "pools": {n: {k: p[k] for k in ("instances_by_hour", "instance_hours_per_day", "usd_per_instance_hour",
                                            "pricing", "usd_per_month", "capacity_per_instance_per_s", "fixed")}
                      for n, p in month["pools"].items()},
            "hours_per_month": window["hours_per_month"],
            "if_the_window_ran_all_month": {k: v for k, v in window.items() if k != "hours_per_month"}}


def bill_of_materials(pools: list[PoolServing], summary: dict | None, month: dict | None = None) -> dict:
    """The BOM; `month`: the plan's month from the traffic curve (None: the run's bill x 730 h, with its caveat)."""
    sim_pools = (summary or {}).get("pools") or {}
    per_pool = {s.name: pool_bom(s, sim_pools.get(s.name)) for s in pools}
    devices: dict[str, dict[str, int]] = {}
    for b in per_pool.values():
        d = devices.setdefault(b["hardware"], {"start": 0, "simulated_peak": 0, "max": 0})
        for k in d:
            d[k] += b["devices"][k]
    start = sum(b["usd_per_hour"]["start"] for b in per_pool.values())
    peak = sum(b["usd_per_hour"]["simulated_peak"] for b in per_pool.values())
    return {
        "assumptions": [
            "prices are the simulation's: a pool's usd_per_hour per instance, else its hardware's per device "
            "(conf/hardware, 2025 on-demand list prices; assumptions)",
            "nodes: pods of a pool packed onto whole nodes; an instance over several nodes takes whole nodes",
            f"simulated_peak: the largest instance count the simulated autoscaler reached ({SUMMARY})",
            "no storage, network, CPU-only gateway or control-plane costs",
        ],
        "pools": per_pool,
        "fleet": {"devices_by_hardware": devices,
                  "nodes": {k: sum(b["nodes"][k] for b in per_pool.values())
                            for k in ("start", "simulated_peak", "max")},
                  "usd_per_hour": {"start": start, "simulated_peak": peak}},
        "monthly": (curve_monthly(month, monthly(summary, start, peak, curve=True)) if month
                    else monthly(summary, start, peak)),
    }
