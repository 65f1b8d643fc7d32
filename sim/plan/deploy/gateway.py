"""The gateway settings the simulated fleet ran behind, as a documented YAML for whatever gateway fronts the pools
(no product's own format): which pool serves each request class (placement), how requests pick an instance
(router), admission caps, and the overload ladder (scale-up, fallback pool, circuit breaker, each a P99 TPOT
threshold over a window, released below `release_fraction` of it)."""
from __future__ import annotations

import dataclasses

from sim.plan.deploy.kubernetes import object_name


def _plain(value):
    """Frozen records and tuples (sim/resolve.py's typed parameters) as plain YAML values."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def gateway_settings(run, ports: dict[str, int]) -> dict:
    """The settings document (keys as the simulator names them; durations in s)."""
    fleet = run.fleet
    ov = fleet.overload
    return {
        "services": {name: f"http://{object_name(name)}:{ports[name]}" for name in run.pools},
        "router": {"policy": fleet.router.name, **{k: _plain(v) for k, v in fleet.router.params},
                   "max_outstanding_per_instance": fleet.max_outstanding},
        "placement": {"policy": fleet.placement.name, **{k: _plain(v) for k, v in fleet.placement.params}},
        "overload_ladder": {
            "enabled": ov.enabled,
            "window_s": ov.window_s, "check_interval_s": ov.check_interval_s,
            "watch_pools": list(ov.watch_pools) if ov.watch_pools is not None else "all",
            "levels": [
                {"level": "scale_up", "when_tpot_p99_s_over": ov.scale_up_tpot_p99_s,
                 "action": "ask the watched pools' autoscalers for capacity (their ScaledObject's overload trigger)"},
                {"level": "fallback", "when_tpot_p99_s_over": ov.fallback_tpot_p99_s,
                 "action": f"send new requests to pool {ov.fallback_pool}" if ov.fallback_pool else "none"},
                {"level": "circuit_breaker", "when_tpot_p99_s_over": ov.breaker_tpot_p99_s,
                 "action": "reject new requests (HTTP 503, reason circuit_breaker)"},
            ],
            "release_fraction": ov.release_fraction,
            "min_samples": ov.min_samples,
            "max_queue_per_instance": ov.max_queue_per_instance,
        },
        "frontend_overhead_s": run.scenario.frontend_overhead_s,
    }


HEADER = """The gateway in front of the pools, as the simulation ran it. Not a product's format: map each key to
your gateway (Envoy AI Gateway, the Gateway API inference extension, LiteLLM, your own).
- services: each pool's Service (kubernetes.yaml).
- router: how a request picks an instance inside its pool (least_outstanding: fewest requests in flight;
  prefix_affinity: the instance holding the prompt's prefix; max_outstanding_per_instance: admission cap).
- placement: which pools serve each request class, in order (spill_over: the next pool once the first has more
  than spill_queue_per_instance queued per instance).
- overload_ladder: every check_interval_s, the P99 time per output token of the watched pools over window_s moves
  the level up past each threshold and back down below release_fraction x that threshold; a P99 over fewer
  than min_samples finished requests is not acted on. Over max_queue_per_instance a request is rejected
  (queue_full). The gateway must export these P99s (names in autoscaler.yaml queries where the engine has none)."""
