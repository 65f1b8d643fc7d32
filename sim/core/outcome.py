"""What the engine hands to the programs built on it: a finished run as typed records, no live objects.

`run_cluster` (sim/core/run.py) fills a `RunOutcome` at the end of the run: the request columns, the sampled
series, the invariant verdicts and, per pool, the facts the summary, the review and the planners read
(`PoolOutcome`: instance counts, the bill, iterations and their time by part, prefix cache counts, memory plan,
the cost model's description, failures, the scheduler that ran); fleet-wide, the scale events, the overload
ladder's transitions and the placement's routes. The programs import these records (and `sim.core.pricing`),
never the cluster, pools or instances.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inferplan.columns import Columns


@dataclass(frozen=True)
class SchedulerFacts:
    """The scheduler one pool's instances ran, as built (engine preset and pool settings applied). None: the
    policy has no such setting (static and dynamic batching have no running-sequence limit), or the pool never
    had an instance."""

    max_num_seqs: int | None
    token_budget: int | None      # tokens per iteration (vLLM max_num_batched_tokens)
    chunked_prefill: bool | None  # None: not an iteration-level scheduler


@dataclass(frozen=True)
class PrefixCacheFacts:
    """Prefix-cache counts summed over a pool's instances (tokens)."""

    enabled: bool
    hit_tokens: int
    tier2_hit_tokens: int
    lookup_tokens: int


@dataclass(frozen=True)
class PoolOutcome:
    """One pool at the end of a run."""

    name: str
    hardware: str
    model: str
    role: str                          # unified | prefill | decode
    tp: int
    weights_dtype: str
    kv_dtype: str
    engine: str                        # the engine preset's name ("" when the pool names none)
    engine_version: str
    devices_per_instance: int
    instances_start: int
    instances_launched: int
    min_instances: int
    max_instances: int
    instance_times_s: list[tuple[float, float, float]]  # (started, active, stopped) per instance, NaN not reached
    on_demand_usd_per_instance_hour: float
    usd_per_instance_hour: float       # as billed (the pricing's discount applied)
    price_kind: str                    # on_demand | reserved | spot
    price_discount: float
    bill: dict[str, float]             # usd, billed/alive/busy instance hours, device and node hours, energy, waste
    requests_completed: int
    kv_blocks_per_instance: int
    block_size_tokens: int
    weight_bytes: float
    kv_capacity_bytes: float
    iterations: int
    time_breakdown_s: dict[str, float]  # iteration seconds by part (sim.core.cost.base.PARTS)
    hidden_communication_s: float       # communication overlapped by compute (not in the iteration times)
    prefix_cache: PrefixCacheFacts
    cost_kind: str                     # the cost model's kind (analytical | measured | mixed ...)
    cost_model: dict[str, Any]         # the cost model's own description (`CostModel.describe()`)
    failures: list[tuple[float, int, str]]  # (t_s, instance index, cause) of each instance failure
    scheduler: SchedulerFacts


@dataclass(frozen=True)
class OverloadFacts:
    """The overload ladder as configured (`enabled` False: no ladder) and what it did."""

    enabled: bool
    fallback_pool: str | None
    fallback_tpot_p99_s: float
    transitions: list[tuple[float, int, int, float]]  # (t_s, from_level, to_level, window TPOT P99 s)


@dataclass(frozen=True)
class FleetOutcome:
    """Fleet-wide facts: pools in configuration order, the autoscalers' decisions, the placement's routes."""

    pools: dict[str, PoolOutcome]
    scale_events: list[tuple]                  # (t_s, pool, old, new) provisioned instances
    autoscalers: dict[str, str]                # pool -> the autoscaler's class name
    routes: dict[str, list[str]]               # request class -> candidate pools, first = preferred
    overload: OverloadFacts
    itl_s: dict[str, float]                    # inter-token gaps over every instance: p50, p90, p99, mean
    revenue: dict[str, float] | None           # the completed requests under the scenario's price sheet


@dataclass
class RunOutcome:
    """What the engine hands to the results layer: request columns, sampled series, invariant verdicts, the
    fleet's facts, and the signal that stopped the run early (0: it ran to its end)."""

    requests: Columns  # numbers as numpy arrays, strings as Labels (inferplan/columns.py, inferplan/labels.py)
    timeseries_columns: dict  # TS_COLUMNS -> values per sampling interval
    pool_columns: dict        # POOL_COLUMNS -> values per (interval, pool)
    end_s: float
    peak_instances: dict
    invariants: dict[str, str]
    fleet: FleetOutcome
    interrupted_by: int = 0
