"""The object that enforces a pool's simulated autoscaler: a KEDA ScaledObject (keda.sh/v1alpha1, which runs an
autoscaling/v2 HPA underneath) with the policy's metric thresholds, interval, step and cooldown, and its min/max.

- `reactive`: one Prometheus trigger per signal the policy watches (P99 TPOT / TTFT over the scenario's monitor
  window, queued requests per instance, KV-cache use), each at the policy's threshold; at most `step` pods per
  `cooldown_s` either way (HPA behavior). With the overload ladder on, a trigger on the watched pools' P99 TPOT at
  its scale-up level (the ladder's first level asks the pools for capacity).
- `predictive`: a Prometheus trigger on the request rate at `requests_per_s_per_instance / headroom` per pod (the
  simulated sizing rule, on the measured rate), plus KEDA cron triggers pre-scaling to the instance counts the
  simulated forecast provisioned, minute by minute (`pools.parquet`), as a daily schedule.
- `scheduled`: one KEDA cron trigger per step of its plan.
- `fixed`: no object; the Deployment's `replicas` is the size.

Where KEDA/HPA differ from the simulated policy, the annotation `inferplan.io/differences` says so.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from sim.core.policies import autoscaler_settings
from sim.plan.deploy.kubernetes import ANNOTATION, object_name, selector, workload_kind
from sim.plan.deploy.source import PoolServing

PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"  # assumption: a Prometheus Operator install
# Engine metrics the triggers read (names as the pinned releases register them: vllm/engine/metrics.py,
# vllm/v1/metrics/loggers.py; sglang/srt/metrics/collector.py of 0.4.0, exported with --enable-metrics). SGLang
# 0.3.0 and TensorRT-LLM export none under these names: the gateway records them (gateway.yaml).
METRICS = {
    "vllm": {"waiting": "vllm:num_requests_waiting", "kv": "vllm:gpu_cache_usage_perc",
             "tpot": "vllm:time_per_output_token_seconds", "ttft": "vllm:time_to_first_token_seconds"},
    "sglang": {"waiting": "sglang:num_queue_reqs", "kv": "sglang:token_usage",
               "tpot": "sglang:time_per_output_token_seconds", "ttft": "sglang:time_to_first_token_seconds"},
    "gateway": {"waiting": "inferplan_gateway_queued_requests", "kv": "inferplan_gateway_kv_utilization",
                "tpot": "inferplan_gateway_time_per_output_token_seconds",
                "ttft": "inferplan_gateway_time_to_first_token_seconds"},
}
MAX_CRON_SEGMENTS = 48   # a pre-scale schedule longer than this is coarsened (15 min, then hourly buckets)


@dataclass(frozen=True)
class Policy:
    """A pool's autoscaler as the simulation ran it: every parameter (the class defaults filled in)."""

    name: str
    params: dict
    min_replicas: int
    max_replicas: int


def simulated_policy(run, s: PoolServing) -> Policy:
    """The pool's autoscaler, built as the simulation builds it, read back parameter by parameter."""
    comp = run.fleet.autoscaler(s.name)
    params = autoscaler_settings(comp.name, comp.kwargs())
    return Policy(comp.name, params, s.min_instances, s.max_instances)


def clock_origin_s(run) -> float | None:
    """Time of day (s) at simulated t = 0: the traffic curve's start (`curve_start_s` of a daily part) plus the
    `window` transforms that rebase it; None when the scenario has no clock."""
    traffic = run.scenario.traffic or {}
    parts = traffic.get("parts") or [traffic]
    starts = [float(p["curve_start_s"]) for p in parts if isinstance(p, dict) and "curve_start_s" in p]
    if not starts:
        return None
    shift = sum(float(t.get("start_s", 0)) for t in traffic.get("transforms") or []
                if t.get("kind") == "window" and t.get("rebase", True))
    return (min(starts) + shift) % 86400.0


def _promql(s: PoolServing, engine: str, window_s: float) -> dict[str, str]:
    m = METRICS[engine]
    # (the engines' metrics by pod name; the gateway's carry the pool as a label)
    sel = f'{{pool="{s.name}"}}' if engine == "gateway" else f'{{pod=~"{object_name(s.name)}-.*"}}'
    w = f"[{max(1, round(window_s))}s]"
    return {
        "tpot": f"histogram_quantile(0.99, sum by (le) (rate({m['tpot']}_bucket{sel}{w})))",
        "ttft": f"histogram_quantile(0.99, sum by (le) (rate({m['ttft']}_bucket{sel}{w})))",
        "waiting": f"sum({m['waiting']}{sel})",
        "kv": f"max({m['kv']}{sel})",
        "rate": f"sum(rate({m['ttft']}_count{sel}{w}))",
    }


def _trigger(name: str, query: str, threshold: float, metric_type: str) -> dict:
    return {"type": "prometheus", "name": name, "metricType": metric_type,
            "metadata": {"serverAddress": PROMETHEUS, "query": query, "threshold": f"{threshold:g}"}}


def _cron(start_min: int, end_min: int, replicas: int) -> dict:
    """A daily KEDA cron trigger holding `replicas` from minute-of-day `start_min` to `end_min` (UTC)."""
    def at(m: int) -> str:
        m %= 1440
        return f"{m % 60} {m // 60} * * *"
    return {"type": "cron", "metadata": {"timezone": "UTC", "start": at(start_min), "end": at(end_min),
                                         "desiredReplicas": str(replicas)}}


def prescale_segments(rows: list[dict], origin_s: float, floor: int) -> list[tuple[int, int, int]]:
    """(start minute-of-day, end minute, instances) of the simulated provisioning (`starting + active` per
    sample of pools.parquet), the largest count in each minute of the day, runs of equal counts merged, counts at
    or below `floor` (the min replicas) left out; coarsened to 15 min, then hourly, when too long."""
    by_minute: dict[int, int] = {}
    for r in rows:
        m = int(((origin_s + float(r["t_s"])) % 86400.0) // 60)
        by_minute[m] = max(by_minute.get(m, 0), int(r["starting"]) + int(r["active"]))
    for bucket in (1, 15, 60):
        coarse: dict[int, int] = {}
        for m, n in by_minute.items():
            coarse[m - m % bucket] = max(coarse.get(m - m % bucket, 0), n)
        segs: list[list[int]] = []
        for m in sorted(coarse):
            n = coarse[m]
            if segs and segs[-1][1] == m and segs[-1][2] == n:
                segs[-1][1] = m + bucket
            else:
                segs.append([m, m + bucket, n])
        segs = [x for x in segs if x[2] > floor]
        if len(segs) <= MAX_CRON_SEGMENTS:
            return [tuple(x) for x in segs]
    return [tuple(x) for x in segs[:MAX_CRON_SEGMENTS]]


def _behavior(step: int, period_s: float, down_window_s: float) -> dict:
    period = int(min(1800, max(1, round(period_s))))   # (HPA allows 1..1800 s)
    rule = {"policies": [{"type": "Pods", "value": int(step), "periodSeconds": period}]}
    return {"scaleUp": {"stabilizationWindowSeconds": 0, **rule},
            "scaleDown": {"stabilizationWindowSeconds": int(min(3600, max(0, round(down_window_s)))), **rule}}


def scaled_object(run, s: PoolServing, engine: str, provenance: str, pool_rows: list[dict] | None) -> dict | None:
    """The KEDA ScaledObject of pool `s` (None for a fixed-size pool). `engine`: vllm | sglang | gateway (whose
    metrics the queries read)."""
    policy = simulated_policy(run, s)
    if policy.name == "fixed":
        return None
    p, q = policy.params, _promql(s, engine, run.scenario.monitor_window_s)
    differences: list[str] = []
    triggers: list[dict] = []
    behavior = None
    if policy.name == "reactive":
        for key, signal, kind in (("tpot_p99_s", "tpot", "Value"), ("ttft_p99_s", "ttft", "Value"),
                                  ("queue_per_instance", "waiting", "AverageValue"), ("kv_utilization", "kv", "Value")):
            if p[key] is not None:
                triggers.append(_trigger(f"{signal}-{key.replace('_', '-')}", q[signal], float(p[key]), kind))
        ov = run.fleet.overload
        if ov.enabled and (ov.watch_pools is None or s.name in ov.watch_pools):
            triggers.append(_trigger("overload-scale-up-tpot-p99-s", q["tpot"], ov.scale_up_tpot_p99_s, "Value"))
        behavior = _behavior(p["step"], p["cooldown_s"], p["cooldown_s"])
        differences.append(f"the simulated policy adds/removes {p['step']} instance(s) per decision; the HPA sizes "
                           f"in proportion to each metric, limited here to {p['step']} pod(s) per "
                           f"{p['cooldown_s']:g} s")
        differences.append(f"scale-down: the simulated policy waits until every signal is under "
                           f"{p['scale_down_fraction']:g} x its threshold; the HPA's tolerance is cluster-wide (10%); "
                           f"behavior.scaleDown.tolerance: {1 - p['scale_down_fraction']:g} (Kubernetes >= 1.33, "
                           "HPAConfigurableTolerance) matches it")
        differences.append("kv: the simulated signal is the fullest instance's KV use (max), as the query")
    elif policy.name == "predictive":
        per_pod = p["requests_per_s_per_instance"] / p["headroom"]
        triggers.append(_trigger("request-rate-per-instance", q["rate"], per_pod, "AverageValue"))
        origin = clock_origin_s(run)
        for a, b, n in prescale_segments(pool_rows or [], origin or 0.0, policy.min_replicas):
            triggers.append(_cron(a, b, n))
        behavior = {"scaleUp": {"stabilizationWindowSeconds": 0}, "scaleDown": {"stabilizationWindowSeconds": 0}}
        differences.append(f"the simulated {p['forecast']} forecast looks ahead by the cold start; here the cron "
                           "triggers replay the counts it provisioned (a daily schedule), the rate trigger reacts")
        if origin is None:
            differences.append("the scenario has no clock: simulated t = 0 is placed at 00:00 UTC")
        if p["warm_spares"]:
            differences.append(f"{p['warm_spares']} warm spare(s) (loaded, not serving) were simulated: no object "
                               "here keeps them; run them as a second Deployment outside the Service")
        if not pool_rows:
            differences.append("no simulated run given: no pre-scale schedule")
    elif policy.name == "scheduled":
        plan = sorted(p["plan"])
        for i, (at, n) in enumerate(plan):
            end = plan[(i + 1) % len(plan)][0]
            triggers.append(_cron(int(at // 60), int(end // 60) if end != at else int(at // 60) + 1439, n))
        if p["period_s"] != 86400:
            differences.append(f"the simulated plan repeats every {p['period_s']:g} s; cron repeats daily")
    apiv, kind = workload_kind(s)
    meta = {"name": object_name(s.name), "labels": selector(s),
            "annotations": {ANNOTATION: provenance, "inferplan.io/simulated-policy": json.dumps(
                {"name": policy.name, **p, "min_instances": policy.min_replicas,
                 "max_instances": policy.max_replicas}, default=str)}}
    if differences:
        meta["annotations"]["inferplan.io/differences"] = " | ".join(differences)
    spec: dict = {"scaleTargetRef": {"apiVersion": apiv, "kind": kind, "name": object_name(s.name)},
                  "pollingInterval": max(1, math.ceil(p["interval_s"])),
                  "minReplicaCount": policy.min_replicas, "maxReplicaCount": policy.max_replicas,
                  "triggers": triggers}
    if behavior:
        spec["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": behavior}}
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": meta, "spec": spec}
