"""The evidence a finished run leaves, as plain data the diagnosis reads (no simulator objects past this point).

`RunEvidence.from_run` copies what `sim/review/diagnosis.py` needs out of the engine's outcome
(sim/core/outcome.py) and the run's configuration records at the end of a run: the
request columns (requests.parquet), the per-pool samples (pools.parquet), the autoscalers' scale events, the
overload ladder's transitions, every instance's start/active/stop times, each pool's autoscaler settings, the
scheduler each pool ran (and the overrides that reach it), the placement's routes, and whether the run stopped
before its end. Tests build one directly from arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.core.outcome import PoolOutcome, RunOutcome


@dataclass
class BatchingFacts:
    """The scheduler one pool ran, as it ran (engine presets and per-pool settings applied), and the Hydra override
    keys that reach it: a knob is only suggested through a key that changes this pool. The defaults are the
    `continuous` batching group (conf/batching/continuous.yaml) chosen for the whole run."""

    policy: str = "continuous"           # the batching policy, or the engine preset whose scheduler ran
    max_num_seqs: int | None = 256       # None: the policy has no running-sequence limit (static, dynamic)
    token_budget: int | None = 8192      # tokens per iteration (vLLM max_num_batched_tokens)
    chunked_prefill: bool | None = False  # None: not an iteration-level scheduler (no decode joins a prefill)
    seqs_key: str | None = "batching.max_num_seqs"   # the override of max_num_seqs (None: none reaches the pool)
    budget_key: str | None = None        # the override of the token budget, where it may go below the context
    chunk_on: str | None = "batching=chunked_prefill"  # the override that turns chunked prefill on
    chunk_search: str | None = "search.batching=[continuous,chunked_prefill]"
    chunk_budget_tokens: int | None = 2048  # the token budget chunked prefill would run with after `chunk_on`


@dataclass
class PoolFacts:
    """What the diagnosis needs to know about one pool's configuration."""

    autoscaler: str                    # the policy's registry key (`fixed`, `reactive`, `predictive`, ...)
    autoscaler_params: dict            # its parameters as configured (interval_s, step, cooldown_s, ...)
    instances: int                     # at the start of the run
    min_instances: int
    max_instances: int
    instance_times_s: list[tuple[float, float, float]] = field(default_factory=list)  # (started, active, stopped)
    role: str = "unified"              # unified | prefill | decode
    kv_dtype: str = "bf16"
    gpu_memory_utilization: float | None = 0.9  # None: an engine preset sets it (the pool's key does not reach)
    num_gpu_blocks_override: int | None = None   # a fixed KV capacity: dtype and memory share do not change it
    chunked_loading: bool | None = True  # None: load_bytes_per_s is set, so chunked_loading changes nothing
    batching: BatchingFacts = field(default_factory=BatchingFacts)


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
    partial: bool = False              # a signal stopped the run before its end (summary.json `status: interrupted`)
    overload_fallback_tpot_p99_s: float | None = None  # the ladder's fallback threshold (None: ladder off)

    @classmethod
    def from_run(cls, run, outcome: RunOutcome, *, partial: bool = False) -> "RunEvidence":
        cols, pool_columns, fleet = outcome.requests, outcome.pool_columns, outcome.fleet
        series: dict = {}
        if pool_columns:
            names = np.asarray(pool_columns["pool"], dtype=object)
            for name in fleet.pools:
                sel = names == name
                series[name] = {k: np.asarray(v)[sel].astype(np.float64) for k, v in pool_columns.items() if k != "pool"}
        pools = {name: _pool_facts(run, name, p) for name, p in fleet.pools.items()}
        oc = fleet.overload
        placement = run.fleet.placement
        routes = {c: list(r) for c, r in fleet.routes.items()}
        return cls(requests=cols, pool_series=series, pools=pools, routes=routes,
                   scale_events=[tuple(e) for e in fleet.scale_events],
                   overload_transitions=[tuple(t) for t in oc.transitions],
                   fallback_pool=oc.fallback_pool if oc.enabled else None,
                   placement=placement.name,
                   spill_queue_per_instance=placement.param("spill_queue_per_instance"),
                   duration_s=float(outcome.end_s), batching=run.batching.kwargs(),
                   partial=partial,
                   overload_fallback_tpot_p99_s=float(oc.fallback_tpot_p99_s) if oc.enabled else None)


def _pool_facts(run, name: str, pool: PoolOutcome) -> PoolFacts:
    """One pool's facts: its configuration records (`run.setups`, `run.fleet`) and what its outcome recorded."""
    setup = run.setups[name]
    spec, scaler = setup.pool, run.fleet.autoscaler(name)
    cold = setup.cold_start
    return PoolFacts(scaler.name, scaler.kwargs(), int(spec.instances),
                     int(pool.min_instances), int(pool.max_instances), list(pool.instance_times_s),
                     role=str(spec.role), kv_dtype=str(spec.kv_dtype),
                     gpu_memory_utilization=float(spec.gpu_memory_utilization) if setup.engine.generic else None,
                     num_gpu_blocks_override=spec.num_gpu_blocks_override,
                     chunked_loading=bool(cold.chunked_loading) if cold.load_bytes_per_s is None else None,
                     batching=_batching_facts(run, name, pool))


def _batching_facts(run, name: str, pool: PoolOutcome) -> BatchingFacts:
    """The pool's scheduler as it ran (its outcome's `scheduler`), and the override keys that reach it."""
    cfg, setup = run.pools[name], run.setups[name]
    engine, batching, ran, scheduler = setup.engine, setup.batching, pool.scheduler, setup.scheduler
    chunked = ran.chunked_prefill
    facts = BatchingFacts(batching.name if engine.generic else engine.name, ran.max_num_seqs, ran.token_budget,
                          chunked, None, None, None, None, None)
    if not engine.generic:
        if scheduler.own_engine:  # the pool's own preset: no single override reaches its keys
            return facts
        facts.seqs_key = "engine.max_num_seqs"
        facts.budget_key = "engine.max_num_batched_tokens" if chunked else None
        if chunked is False:
            facts.chunk_on = "engine.chunked_prefill=true"
            facts.chunk_search = "search.engine.chunked_prefill=[false,true]"
            facts.chunk_budget_tokens = facts.token_budget  # the preset's budget stays
        return facts
    if ran.max_num_seqs is not None:
        facts.seqs_key = _batching_key(run, name, "max_num_seqs")
    if chunked:  # (without chunking a budget below the context would leave long prompts unschedulable)
        facts.budget_key = _batching_key(run, name, "token_budget")
    elif chunked is False:
        # (a pool that names its own policy keeps it whatever the group is: only its own key switches it)
        key = f"scenario.pools.{name}.batching_policy" if cfg.batching_policy is not None else "batching"
        facts.chunk_on = f"{key}=chunked_prefill"
        facts.chunk_search = f"search.{key}=[{batching.name},chunked_prefill]"
        from sim.resolve import _policy_defaults  # (the preset the switch loads: conf/batching/chunked_prefill.yaml)
        facts.chunk_budget_tokens = int(scheduler.pool_batching.param(  # (the pool's own key, else the preset's)
            "token_budget", _policy_defaults("chunked_prefill")["token_budget"]))
    return facts


def _batching_key(run, name: str, param: str) -> str:
    """The override of one batching parameter of pool `name`: its own `batching:` block where that sets the key
    (it wins over the group), `++` into it where the pool runs its own policy, else the batching group's."""
    setting = run.setups[name].scheduler.setting(param)
    if setting is not None:
        return setting.override
    cfg = run.pools[name]
    if cfg.batching_policy is not None and cfg.batching_policy != run.batching_name:
        return f"++scenario.pools.{name}.batching.{param}"
    return f"batching.{param}"
