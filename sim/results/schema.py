"""The run folder's schema, in one place: file names, the Parquet column types, and `summary.json`'s typed records.

A run folder (docs/results.md) is what a simulation leaves: three Parquet tables, `summary.json`, and `DONE`
written last. This module names them; `sim.results.write` is the only writer and `sim.results.read` the only
reader. `SCHEMA_VERSION` goes up whenever a key or column changes meaning; the reader accepts this version and
upgrades the previous one, and refuses anything else with one line.

Version history: 1 (no `schema_version` key) — `cost.node_hours` held device-hours; 2 — `cost.device_hours` and
`cost.node_hours` (device-hours over each pool's devices per node), the same per pool, and `schema_version`.
"""
from __future__ import annotations

import types
from typing import Any, NotRequired, TypedDict, Union, get_args, get_origin, get_type_hints

import pyarrow as pa

SCHEMA_VERSION = 2

SUMMARY = "summary.json"
REQUESTS = "requests.parquet"
TIMESERIES = "timeseries.parquet"
POOLS = "pools.parquet"
DONE = "DONE"
FAILED = "FAILED"            # a sweep job that could not run: its one-line error
INTERRUPTED = "INTERRUPTED"  # a sweep job stopped by a signal before its simulation ran (nothing simulated)
ERROR_LOG = "error.log"      # beside FAILED: a bug's traceback
RUN_FILES = (SUMMARY, REQUESTS, TIMESERIES, POOLS, DONE)

REQUEST_TYPES: dict[str, pa.DataType] = {
    "request_id": pa.int64(), "arrival_s": pa.float64(), "prompt_tokens": pa.int64(), "output_tokens": pa.int64(),
    "cached_tokens": pa.int64(), "request_class": pa.string(), "pool": pa.string(), "instance": pa.int32(),
    "status": pa.string(), "reject_reason": pa.string(), "first_token_s": pa.float64(), "finish_s": pa.float64(),
    "ttft_s": pa.float64(), "tpot_s": pa.float64(), "e2e_s": pa.float64(), "preemptions": pa.int32(),
    "fallback": pa.bool_(), "prefill_pool": pa.string(), "itl_max_s": pa.float64(),
}
# timeseries.parquet: every column float64 but these counts.
TIMESERIES_COUNTS = ("arrivals", "completions", "queued", "running", "instances", "overload_level")
# pools.parquet: every column int64 (instance counts by state, queue lengths) but these.
POOL_TYPES: dict[str, pa.DataType] = {"t_s": pa.float64(), "pool": pa.string(), "kv_utilization": pa.float64(),
                                      "busy_fraction": pa.float64()}


class Percentiles(TypedDict):
    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None


class RequestCounts(TypedDict):
    arrived: int
    completed: int
    rejected: int
    unfinished: int
    rejected_by_reason: dict[str, int]


class Latency(TypedDict):
    ttft: Percentiles
    tpot: Percentiles
    e2e: Percentiles
    itl: Percentiles


class Throughput(TypedDict):
    requests_per_s: float
    input_tokens_per_s: float
    output_tokens_per_s: float


class SloMet(TypedDict):
    ttft_p99: bool | None      # None: no data (never a pass)
    tpot_p99: bool | None
    served_fraction: bool | None


class ClassSlo(TypedDict):
    requests: int
    completed: int
    ttft_s: Percentiles
    tpot_s: Percentiles
    ttft_p99_s_target: float
    tpot_p99_s_target: float
    attainment: float
    served: float
    met: SloMet


class Slo(TypedDict):
    ttft_p99_s: float
    tpot_p99_s: float
    served_fraction: float
    attainment: float | None
    goodput_requests_per_s: float
    served: float | None
    met: SloMet
    classes: dict[str, ClassSlo]


class Cost(TypedDict):
    usd: float
    usd_per_million_output_tokens: float | None
    usd_per_million_input_tokens: float | None
    usd_per_request: float | None
    device_hours: float
    node_hours: float
    idle_waste_usd: float
    energy_kwh: float
    billing_granularity_s: float
    revenue: dict[str, float] | None
    margin_usd: float | None


class Fleet(TypedDict):
    scale_events: list[list[Any]]
    overload_transitions: list[list[Any]]
    fallback_requests: int
    autoscalers: dict[str, str]


class PoolPricing(TypedDict):
    kind: str                 # on_demand | reserved | spot
    discount: float           # fraction off the on-demand price
    on_demand_usd_per_instance_hour: float
    usd_per_instance_hour: float  # as billed
    usd: float                # the pool's bill (= pools.<pool>.usd)


class PoolFailures(TypedDict):
    count: int
    times_s: list[float]
    instances: list[int]
    causes: list[str]         # scheduled | random | spot
    requests_failed_over: int
    requests_rejected: int


class Failures(TypedDict):
    requests_failed_over: int  # moved off a failed instance (reject_reason `instance_failure`, status not rejected)
    requests_rejected: int     # rejected for want of an instance to take them (`instance_failure`)
    pools: dict[str, PoolFailures]


class PrefixCache(TypedDict):
    enabled: bool
    hit_tokens: int
    tier2_hit_tokens: int
    lookup_tokens: int


class PoolSummary(TypedDict):
    """One pool's figures: what ran, its bill (the keys of sim/core/fleet/billing.py `pool_bill`), its memory plan,
    where its iteration time went, its prefix cache, and its cost model's own description."""

    hardware: str
    model: str
    role: str
    tp: int
    weights_dtype: str
    kv_dtype: str
    devices_per_instance: int
    instances_start: int
    instances_max: int
    instances_launched: int
    usd_per_instance_hour: float
    usd: float
    billed_instance_hours: float
    device_hours: float
    node_hours: float | None      # None in an upgraded version-1 summary
    alive_instance_hours: float
    busy_instance_hours: float
    idle_waste_usd: float
    energy_kwh: float
    requests_completed: int
    kv_blocks_per_instance: int
    block_size_tokens: int
    weight_bytes: float
    kv_capacity_bytes: float
    busy_fraction: float
    iterations: int
    time_breakdown_s: dict[str, float]
    hidden_communication_s: float
    prefix_cache: PrefixCache
    preemptions: int
    cost_model: dict[str, Any]


class CostModelInfo(TypedDict):
    kind: str                 # "measured", "analytical" or "mixed"
    profile: str | None
    hardware: str
    note: str
    sources: NotRequired[dict[str, str]]  # per pool priced from a measured grid: database, engine, version


class KvMemory(TypedDict):
    """Where one pool's KV capacity comes from (sim/results/kv_memory.py)."""

    tokens_per_instance: int
    gpu_memory_utilization: float     # the share of each device the capacity was sized from
    accounting: str                   # profiled | static_fraction (inferplan/config/engine_memory.py)
    fraction_rule: str | None         # the engine's rule for that share, None where the value was given
    sampler_peak_bytes_per_device: float
    basis: str                        # the same, in one line


class Summary(TypedDict):
    """`summary.json` (docs/results.md). `pools` maps a pool name to its figures (hardware, bill, memory, time
    breakdown, prefix cache, cost model); `invariants` each invariant to "ok" or what broke it."""

    schema_version: int
    status: str               # "completed" or "interrupted"
    scenario: str
    seed: int
    simulated_duration_s: float
    requests: RequestCounts
    latency_s: Latency
    throughput: Throughput
    slo: Slo
    cost: Cost
    fleet: Fleet
    pools: dict[str, PoolSummary]
    pricing: dict[str, PoolPricing]   # how each pool's instances were bought and billed
    failures: Failures                # instance failures and what became of their requests
    cost_model: CostModelInfo
    kv_memory: NotRequired[dict[str, KvMemory]]  # per pool: its KV tokens per instance and their basis
    invariants: dict[str, str]
    calibration: Any
    verdict: list[dict[str, Any]]    # per SLO x class x pool, and the aggregates (sim/review/verdict.py)
    diagnosis: list[dict[str, Any]]  # per missed verdict: window, cause, evidence, try (sim/review/diagnosis.py)
    wall_time_s: float


def summary_problem(data: Any, *, complete: bool = True) -> tuple[str, str] | None:
    """The first place where `data` (a summary as JSON holds it: NaN written as null) breaks the `Summary` schema,
    as (field path, problem), or None. Keys the schema does not name are allowed (a newer minor addition); a value
    of another type is not, nor, when `complete` (what the writer checks), a missing key. A reader checks the keys
    present (`complete=False`): partial summaries of tools and tests are read by the same code."""
    return _problem(data, Summary, "", complete)


def _problem(value: Any, hint: Any, path: str, complete: bool) -> tuple[str, str] | None:
    if hint is Any:
        return None
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        found = [_problem(value, h, path, complete) for h in options if h is not type(None)]
        return None if any(f is None for f in found) else found[0]
    if value is None:
        return None if hint is float else (path or "summary", "is null")  # (NaN is written as null)
    if isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__required_keys__"):  # a TypedDict
        if not isinstance(value, dict):
            return path or "summary", f"is a {type(value).__name__}, expected an object"
        for key, sub in get_type_hints(hint, include_extras=True).items():
            optional = get_origin(sub) is NotRequired  # (read here: postponed annotations hide it from the class)
            if optional:
                sub = get_args(sub)[0]
            if key not in value:
                if complete and not optional and key in hint.__required_keys__:
                    return f"{path}.{key}".lstrip("."), "missing"
                continue
            found = _problem(value[key], sub, f"{path}.{key}".lstrip("."), complete)
            if found:
                return found
        return None
    if origin is dict:
        if not isinstance(value, dict):
            return path, f"is a {type(value).__name__}, expected an object"
        sub = get_args(hint)[1]
        for key, item in value.items():
            found = _problem(item, sub, f"{path}.{key}", complete)
            if found:
                return found
        return None
    if origin is list:
        if not isinstance(value, list):
            return path, f"is a {type(value).__name__}, expected a list"
        sub = get_args(hint)[0]
        for i, item in enumerate(value):
            found = _problem(item, sub, f"{path}[{i}]", complete)
            if found:
                return found
        return None
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, hint)
    return None if ok else (path, f"is {value!r}, expected {hint.__name__}")
