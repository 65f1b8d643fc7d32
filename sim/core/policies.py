"""The engine's public entry for a policy's settings as the engine builds it: programs that turn a simulated
policy into the objects that enforce it on a real cluster (sim/plan/deploy/autoscaling.py) read every parameter
here, the class defaults filled in, without building or inspecting the engine's objects themselves."""
from __future__ import annotations

from typing import Any

from sim.core.fleet.autoscaler import make_autoscaler
from sim.core.fleet.autoscaler.base import ScalerContext

__all__ = ["autoscaler_settings"]


def autoscaler_settings(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Autoscaler `name` built from its configured `params` as a pool builds it, read back: `reactive` its
    signals' thresholds, step and cooldown; `predictive` its sizing rule and forecast; `scheduled` its plan;
    anything else (`fixed`) none."""
    a: Any = make_autoscaler(name, params, ScalerContext())
    if name == "reactive":
        return {k: getattr(a, k) for k in ("interval_s", "ttft_p99_s", "tpot_p99_s", "queue_per_instance",
                                           "kv_utilization", "step", "cooldown_s", "scale_down_fraction")}
    if name == "predictive":
        return {"requests_per_s_per_instance": a.capacity, "interval_s": a.interval_s, "headroom": a.headroom,
                "forecast": a.forecast_kind, "warm_spares": a.warm_spares}
    if name == "scheduled":
        return {"interval_s": a.interval_s, "period_s": a.period_s, "time_offset_s": a.offset_s,
                "plan": [[at, n] for at, n in a.steps]}
    return {}
