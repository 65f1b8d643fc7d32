"""Dollars and energy of a run: instance-hours by pool x price, idle waste, kWh, and optional revenue.

Billing: each instance is paid from the moment it is asked for (provisioning and loading included) until it
stops (or fails), rounded up to `billing_granularity_s` per instance (1 s = per-second billing; 3600 = hourly).
Price: the pool's on-demand price per instance-hour less its pricing's discount (`PoolPrice`, inferplan/config/fleet.py: on demand 0,
reserved and spot the fractions the scenario's `pricing:` block states; a spot pool's interruptions are
failures, sim/core/fleet/failures.py).
Energy: per device, idle power while alive plus (rated power - idle) x the fraction of time spent in iterations.
Revenue (optional `price_sheet`): USD per million input tokens on a prefix-cache hit and on a miss, and per
million output tokens, the way providers report their serving economics.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from inferplan.config.run import PriceSheet


def usd_per_instance_hour(pool) -> float:
    """What one instance of `pool` is billed per hour: its on-demand price less its pricing's discount (on demand:
    the price itself, to the bit)."""
    return pool.usd_per_hour * (1.0 - pool.price.discount)


def instance_billed_s(started_s: float, stopped_s: float, end_s: float, granularity_s: float) -> float:
    stop = stopped_s if stopped_s == stopped_s else end_s
    alive = max(0.0, stop - started_s)
    return math.ceil(alive / granularity_s - 1e-9) * granularity_s if granularity_s > 0 else alive


def pool_billed_s(pool, at_s: float, granularity_s: float) -> float:
    """Instance-seconds billed for one pool's instances up to `at_s` (a live instance as if it stopped then)."""
    billed = 0.0
    for inst in pool.instances:
        billed += instance_billed_s(inst.started_s, inst.stopped_s, at_s, granularity_s)
    return billed


def pool_usd(pool, at_s: float, granularity_s: float) -> float:
    """The one dollar rule: USD billed for one pool up to `at_s`. The bill (`pool_bill`, at the run's end) and
    the time series' `cost_usd` column (sim/core/metrics.py, at each sample) both read it."""
    return _usd(pool, pool_billed_s(pool, at_s, granularity_s))


def _usd(pool, billed_s: float) -> float:
    return billed_s / 3600.0 * usd_per_instance_hour(pool)


def pool_bill(pool, end_s: float, granularity_s: float) -> dict:
    """USD, device-hours, node-hours (device-hours over the hardware's devices per node), idle waste and energy of one pool's instances over the run."""
    alive = busy = 0.0
    for inst in pool.instances:
        stop = inst.stopped_s if inst.stopped_s == inst.stopped_s else end_s
        alive += max(0.0, stop - inst.started_s)
        busy += inst.busy_s
    billed = pool_billed_s(pool, end_s, granularity_s)
    hw, dev = pool.hardware, pool.devices_per_instance
    usd = _usd(pool, billed)  # (= pool_usd(pool, end_s, granularity_s), without summing the instances twice)
    energy_kwh = dev * (hw.idle_power_w * alive + (hw.power_w - hw.idle_power_w) * busy) / 3.6e6
    device_h = dev * billed / 3600.0
    return {"usd": usd, "billed_instance_hours": billed / 3600.0, "device_hours": device_h,
            "node_hours": device_h / max(1, hw.devices_per_node),
            "alive_instance_hours": alive / 3600.0, "busy_instance_hours": busy / 3600.0,
            "idle_waste_usd": max(0.0, alive - busy) / 3600.0 * usd_per_instance_hour(pool),
            "energy_kwh": energy_kwh}


def revenue_usd(cols: Mapping[str, Any], price_sheet: PriceSheet | None) -> dict | None:
    """Revenue of the completed requests under a price sheet; None without one."""
    if price_sheet is None:
        return None
    done = cols["status"] == "completed"
    cached = cols["cached_tokens"][done].astype(np.float64)
    miss = cols["prompt_tokens"][done] - cached
    out = cols["output_tokens"][done].astype(np.float64)
    hit_p = float(price_sheet.usd_per_million_input_tokens_cache_hit)
    miss_p = float(price_sheet.usd_per_million_input_tokens_cache_miss)
    out_p = float(price_sheet.usd_per_million_output_tokens)
    rev = (cached.sum() * hit_p + miss.sum() * miss_p + out.sum() * out_p) / 1e6
    return {"usd": float(rev), "input_cache_hit_tokens": float(cached.sum()), "input_cache_miss_tokens": float(miss.sum()),
            "output_tokens": float(out.sum())}
