"""The evidence a finished run leaves, as plain data the diagnosis reads (no simulator objects past this point).

`RunEvidence.from_run` copies what `sim/review/diagnosis.py` needs out of the cluster at the end of a run: the
request columns (requests.parquet), the per-pool samples (pools.parquet), the autoscalers' scale events, the
overload ladder's transitions, every instance's start/active/stop times, each pool's autoscaler settings and the
placement's routes. Tests build one directly from arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class PoolFacts:
    """What the diagnosis needs to know about one pool's configuration."""

    autoscaler: str                    # the policy's registry key (`fixed`, `reactive`, `predictive`, ...)
    autoscaler_params: dict            # its parameters as configured (interval_s, step, cooldown_s, ...)
    instances: int                     # at the start of the run
    min_instances: int
    max_instances: int
    instance_times_s: list[tuple[float, float, float]] = field(default_factory=list)  # (started, active, stopped)


@dataclass
class RunEvidence:
    requests: dict                     # request columns (sim/core/metrics.py RequestRecorder.columns)
    pool_series: dict                  # pool -> {POOL_COLUMNS -> np.ndarray} over the sampled intervals
    pools: dict                        # pool -> PoolFacts
    routes: dict                       # request class -> candidate pools, first = preferred
    scale_events: list                 # (t_s, pool, old, new) provisioned instances
    overload_transitions: list         # (t_s, from_level, to_level, window TPOT P99 s)
    fallback_pool: str | None = None
    placement: str = "static"
    spill_queue_per_instance: float | None = None
    duration_s: float = 0.0
    batching: dict = field(default_factory=dict)  # the batching group's parameters (token_budget, max_num_seqs)

    @classmethod
    def from_run(cls, run, cluster, cols: dict, pool_columns: dict | None, duration_s: float) -> "RunEvidence":
        series: dict = {}
        if pool_columns:
            names = np.asarray(pool_columns["pool"], dtype=object)
            for name in cluster.pools:
                sel = names == name
                series[name] = {k: np.asarray(v)[sel].astype(np.float64) for k, v in pool_columns.items() if k != "pool"}
        pools = {}
        for name, p in cluster.pools.items():
            spec = dict(run.pools[name].autoscaler or {"name": run.autoscaler_name, **run.autoscaler})
            pools[name] = PoolFacts(str(spec.pop("name", run.autoscaler_name)), spec, int(p.cfg.instances),
                                    int(p.min_instances), int(p.max_instances),
                                    [(float(i.started_s), float(i.active_s), float(i.stopped_s)) for i in p.instances])
        classes = sorted(cols["request_class"].distinct())
        routes = {c: list(cluster.placement.candidates(c)) for c in classes}
        oc = cluster.overload.cfg
        placement = dict(run.scenario.placement or {})
        return cls(requests=cols, pool_series=series, pools=pools, routes=routes,
                   scale_events=[tuple(e) for e in cluster.scale_log],
                   overload_transitions=[tuple(t) for t in cluster.overload.transitions],
                   fallback_pool=oc.fallback_pool if oc.enabled else None,
                   placement=str(placement.get("name", "static")),
                   spill_queue_per_instance=placement.get("spill_queue_per_instance"),
                   duration_s=float(duration_s), batching=dict(run.batching))
