"""Autoscaling policies (key = yaml name in `conf/autoscaler/`); `base.py` holds the protocol and the driver."""
from __future__ import annotations

from sim.core.fleet.autoscaler.base import Autoscaler, ScalerContext, run_autoscaler
from sim.core.fleet.autoscaler.fixed import FixedScaler
from sim.core.fleet.autoscaler.predictive import PredictiveScaler
from sim.core.fleet.autoscaler.reactive import ReactiveScaler
from sim.core.fleet.autoscaler.scheduled import ScheduledScaler

AUTOSCALERS = {
    "fixed": FixedScaler,
    "reactive": ReactiveScaler,
    "predictive": PredictiveScaler,
    "scheduled": ScheduledScaler,
}


def make_autoscaler(name: str, params: dict, context: ScalerContext) -> Autoscaler:
    try:
        factory = AUTOSCALERS[name]
    except KeyError:
        raise KeyError(f"unknown autoscaler {name!r}; valid: {', '.join(AUTOSCALERS)}") from None
    return factory(**params, context=context)


__all__ = ["AUTOSCALERS", "Autoscaler", "FixedScaler", "ScalerContext", "make_autoscaler", "run_autoscaler"]
