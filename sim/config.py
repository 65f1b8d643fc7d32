"""Typed, validated run configuration: the composed Hydra config turned into dataclasses at load, and each pool's
file-backed inputs resolved (sim/resolve.py), so that a run reads nothing from disk.

Unknown or mistyped keys become `InputError`s that name the config group, the key and the valid choices.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from inferplan.errors import InputError, unknown_key
from sim.core.instance.batching import POLICIES
from sim.core.router import ROUTERS


def _plain(cfg) -> Any:
    return OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg


@functools.cache
def _written_types(cls) -> dict[str, str]:
    """A dataclass's field annotations as written in its source ("int | None"): a class compiled with mypyc keeps
    `type` for a union in its annotations, so the check below reads the module's source instead."""
    module = sys.modules[cls.__module__]
    src = Path(module.__file__ or "")
    src = src.with_name(src.name.split(".")[0] + ".py")
    if not src.is_file():
        return {}
    for node in ast.walk(ast.parse(src.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return {st.target.id: ast.unparse(st.annotation) for st in node.body
                    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)}
    return {}


def build(cls, data: dict | None, where: str):
    """Instantiate dataclass `cls` from a mapping, rejecting unknown keys and coercing simple types."""
    data = dict(data or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise unknown_key(where, unknown[0], fields)
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise InputError(where, name, "missing", f"add `{name}:`")
            continue
        value, typ = data[name], f.type
        if not isinstance(typ, str):  # (compiled: the annotation as written)
            typ = _written_types(cls).get(name, typ)
        typ = typ.replace(" | None", "") if isinstance(typ, str) else typ
        try:
            if typ in ("float", float) and value is not None:
                value = float(value)
            elif typ in ("int", int) and value is not None:
                if isinstance(value, float) and not value.is_integer():
                    raise ValueError
                value = int(value)
            elif typ in ("bool", bool) and value is not None:
                if not isinstance(value, bool):
                    raise ValueError
            elif typ in ("str", str) and value is not None:
                value = str(value)
        except (TypeError, ValueError):
            raise InputError(where, name, f"has the wrong type: {value!r}", f"give a {typ}") from None
        kwargs[name] = value
    return cls(**kwargs)


@dataclass(frozen=True)
class PoolConfig:
    """A named group of identical instances (hardware + model + formats + parallelism), as the scenario's yaml
    gives it: its blocks (autoscaler, cold_start, batching, deployment, engine) are parsed by sim/resolve.py into
    the typed `PoolSetup` the core reads; this record stays in the configuration layer."""

    hardware: str
    model: str
    instances: int = 1                      # at the start of the run
    min_instances: int | None = None        # autoscaling bounds; default min(instances, 1) .. 4 x instances
    max_instances: int | None = None
    autoscaler: dict | None = None          # per-pool policy {name: ..., params}; default: the autoscaler group
    cold_start: dict | None = None          # provision_s, chunked_loading, load_bytes_per_s, warmup_s, warm_start_s
    role: str = "unified"                   # unified | prefill (hands requests to `decode_pool`) | decode
    decode_pool: str | None = None
    batching_policy: str | None = None      # a batching policy for this pool only (default: the batching group)
    tp: int = 1
    weights_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    usd_per_hour: float | None = None       # per instance; default: hardware price x tp
    gpu_memory_utilization: float = 0.9     # vLLM's default fraction of device memory it may use
    kv_free_memory_fraction: float = 1.0    # share of what weights and activations leave that KV takes (TRT-LLM)
    block_size_tokens: int = 16             # vLLM's default KV block size on GPUs
    runtime_reserve_bytes: float = 1.5e9    # per device: CUDA context, NCCL buffers, CUDA graphs (assumption)
    batching: dict | None = None            # per-pool overrides of the batching group's parameters
    deployment: dict | None = None          # parallelism and serving options beyond tp (see docs/cost-model.md)
    num_gpu_blocks_override: int | None = None  # force the KV capacity per instance (vLLM's option of that name)
    prefix_caching: bool = False            # keep finished prompts' KV blocks for reuse (LRU), vLLM APC / SGLang radix
    kv_tier2_bytes: float = 0.0             # second KV tier per instance (host DRAM or disk); 0 = none
    kv_tier2_bandwidth_bytes_per_s: float | None = None  # load bandwidth from tier 2; default the host link
    kv_tier2_shared: bool = False           # one tier 2 of kv_tier2_bytes for the whole pool (DeepSeek's 3FS KVCache)
    engine: Any = None                      # an engine preset for this pool: a name or {name, overrides} (conf/engine)
    failures: Any = None                    # [{at_s, instances, repair_s}] or {mtbf_s, repair_s} (sim/core/fleet/failures.py)
    pricing: str = "on_demand"              # on_demand | reserved | spot: the discount off usd_per_hour when billed
    reserved_discount: float | None = None  # default: the scenario's pricing block (conf/config.yaml)
    spot_discount: float | None = None      # default: the scenario's pricing block (conf/config.yaml)
    spot_interruption_mtbf_s: float | None = None  # a spot pool's instances are interrupted at this mean interval
    redundancy: str | None = None           # none | n+1: the planner's headroom check (default: its option)


@dataclass(frozen=True)
class PoolSpec:
    """What the simulator core reads of one pool: its config's scalar settings, resolved at load
    (sim/resolve.py) with an engine preset's memory defaults applied. The `PoolConfig` blocks (autoscaler,
    cold_start, batching, deployment, engine) reach the core as typed objects of `PoolSetup` instead."""

    hardware: str
    model: str
    instances: int
    min_instances: int | None
    max_instances: int | None
    role: str
    decode_pool: str | None
    tp: int
    weights_dtype: str
    kv_dtype: str
    usd_per_hour: float | None
    gpu_memory_utilization: float
    kv_free_memory_fraction: float
    block_size_tokens: int
    runtime_reserve_bytes: float
    num_gpu_blocks_override: int | None
    prefix_caching: bool
    kv_tier2_bytes: float
    kv_tier2_bandwidth_bytes_per_s: float | None
    kv_tier2_shared: bool
    has_deployment: bool                    # the pool gives a `deployment:` (a pool that does not fit names it)

    @classmethod
    def of(cls, p: PoolConfig) -> PoolSpec:
        own = {f.name: getattr(p, f.name) for f in dataclasses.fields(cls) if f.name != "has_deployment"}
        return cls(**own, has_deployment=bool(p.deployment))


@dataclass(frozen=True)
class SloConfig:
    ttft_p99_s: float = 2.0
    tpot_p99_s: float = 0.1
    served_fraction: float = 0.9999
    classes: dict = field(default_factory=dict)  # per request class: {ttft_p99_s, tpot_p99_s} overriding the above

    def for_class(self, name: str) -> tuple[float, float]:
        c = self.classes.get(name, {})
        return float(c.get("ttft_p99_s", self.ttft_p99_s)), float(c.get("tpot_p99_s", self.tpot_p99_s))


@dataclass(frozen=True)
class ScenarioConfig:
    name: str
    traffic: dict
    pools: dict
    slo: dict = field(default_factory=dict)
    description: str = ""
    frontend_overhead_s: float = 0.0
    drain_timeout_s: float = 600.0
    load_multiplier: float = 1.0            # scales the arrival rate (thinning below 1, superposition above)
    placement: dict = field(default_factory=dict)      # which pool serves each request class (sim/core/fleet/placement.py)
    overload: dict = field(default_factory=dict)       # the overload ladder (sim/core/fleet/overload.py)
    price_sheet: dict = field(default_factory=dict)    # optional revenue: USD per million tokens
    rolling_update: dict = field(default_factory=dict) # {at_s, wave_size, pools}: replace instances in waves
    pricing: dict = field(default_factory=dict)        # reserved_discount, spot_discount: pools' defaults
    billing_granularity_s: float = 1.0
    monitor_window_s: float = 60.0                     # window of the P99s autoscalers act on


@dataclass(frozen=True)
class CostConfig:
    kind: str = "roofline"                  # roofline | constant
    step_time_s: float = 0.01               # constant only
    per_token_s: float = 0.0                # constant only
    profile: str = "auto"
    efficiency: dict = field(default_factory=dict)
    efficiency_scale: dict = field(default_factory=dict)  # per op: multiplier on achieved efficiency (fit overlay)
    launch_s: float = 4e-6
    link_efficiency: float = 0.75
    step_overhead_s: float = 2e-3


@dataclass(frozen=True)
class MetricsConfig:
    sample_interval_s: float = 1.0
    progress: Any = "auto"


@dataclass(frozen=True)
class RunConfig:
    """Everything one simulation needs, validated."""

    seed: int
    scenario: ScenarioConfig
    pools: dict[str, PoolConfig]
    slo: SloConfig
    batching_name: str
    batching: dict
    router_name: str
    router: dict
    autoscaler_name: str
    autoscaler: dict
    cost: CostConfig
    metrics: MetricsConfig
    fast_forward: bool = True
    calibration: dict | None = None  # a fitted overlay in effect (written by `sim.validate fit=true`), recorded
    engine: dict = field(default_factory=lambda: {"name": "generic"})  # the engine group (sim/core/instance/engine.py)
    setups: dict = field(default_factory=dict)  # pool name -> sim.resolve.PoolSetup (specs, presets, deployment, ...)
    fleet: Any = None                           # sim.resolve.FleetSetup (router, placement, overload, autoscalers)


def instance_bounds(p: PoolConfig | PoolSpec) -> tuple[int, int]:
    """(min_instances, max_instances) an autoscaler keeps the pool within; defaults min(instances, 1) and
    4 x max(instances, 1)."""
    lo = p.min_instances if p.min_instances is not None else min(p.instances, 1)
    hi = p.max_instances if p.max_instances is not None else max(p.instances, 1) * 4
    return lo, hi


def _check_can_serve(where: str, name: str, p: PoolConfig, group_autoscaler: str) -> None:
    """A pool must be able to hold an instance at some point: bounds in order, and a fixed-size pool not empty."""
    lo, hi = instance_bounds(p)
    if lo < 0 or lo > hi:
        raise InputError(where, f"pools.{name}.min_instances", f"needs 0 <= min_instances <= max_instances, got "
                         f"{lo} and {hi}", "fix the bounds")
    scaler = str((p.autoscaler or {}).get("name", group_autoscaler))
    if hi == 0 or (p.instances == 0 and scaler == "fixed"):
        why = "max_instances is 0" if hi == 0 else "instances is 0 and its autoscaler is `fixed`"
        raise InputError(where, f"pools.{name}.instances", f"the pool can never serve: {why}",
                         "give it instances >= 1, or an autoscaler (reactive, predictive, scheduled) with "
                         "max_instances >= 1, or remove the pool")


def _seed(value: Any) -> int:
    """The run seed: a whole number >= 0 (numpy's SeedSequence takes no negative entropy)."""
    ok = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not ok or value < 0:
        raise InputError("conf/config.yaml", "seed", f"must be a whole number >= 0, got {value!r}",
                         "give e.g. seed=0")
    return int(value)


def _slo(slo: SloConfig, where: str) -> SloConfig:
    """SLO targets are latencies a request can meet: every TTFT and TPOT target > 0 s, served fraction in (0, 1]."""
    targets = {"slo.ttft_p99_s": slo.ttft_p99_s, "slo.tpot_p99_s": slo.tpot_p99_s}
    if not isinstance(slo.classes, dict):
        raise InputError(where, "slo.classes", f"must be a mapping, got {slo.classes!r}",
                         "write `classes: {<class>: {ttft_p99_s: ..., tpot_p99_s: ...}}`")
    for name, c in slo.classes.items():
        if not isinstance(c, dict) or set(c) - {"ttft_p99_s", "tpot_p99_s"}:
            raise InputError(where, f"slo.classes.{name}", f"must hold only ttft_p99_s and tpot_p99_s, got {c!r}",
                             "write `{ttft_p99_s: 2.0, tpot_p99_s: 0.1}`")
        targets.update({f"slo.classes.{name}.{k}": v for k, v in c.items()})
    for field_name, value in targets.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise InputError(where, field_name, f"must be a latency > 0 s, got {value!r}",
                             "give the target in seconds, e.g. 0.1")
    if not 0 < slo.served_fraction <= 1:
        raise InputError(where, "slo.served_fraction", f"must be in (0, 1], got {slo.served_fraction!r}",
                         "use e.g. 0.9999")
    return slo


def load_run_config(cfg) -> RunConfig:
    """Validate a composed config (DictConfig or plain dict) into a `RunConfig`."""
    d = _plain(cfg)
    allowed = {"seed", "scenario", "batching", "router", "autoscaler", "cost", "metrics", "fast_forward",
               "calibration", "engine", "hydra", "check"}  # check: the CLI's gate (sim/__main__.py), not the run's
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise InputError("conf/config.yaml", unknown[0], "unknown top-level key", f"valid keys: {', '.join(sorted(allowed - {'hydra'}))}")
    scen = build(ScenarioConfig, d.get("scenario"), "scenario")
    if not isinstance(scen.pools, dict) or not scen.pools:
        raise InputError(f"scenario/{scen.name}", "pools", "needs at least one pool", "add pools: {name: {hardware: ..., model: ...}}")
    pools = {str(k): build(PoolConfig, v, f"scenario/{scen.name}: pools.{k}") for k, v in scen.pools.items()}
    for name, p in pools.items():
        if p.instances < 0 or p.tp < 1:
            raise InputError(f"scenario/{scen.name}", f"pools.{name}", "instances must be >= 0 and tp >= 1", "fix the counts")
        if not 0 < p.gpu_memory_utilization <= 1:
            raise InputError(f"scenario/{scen.name}", f"pools.{name}.gpu_memory_utilization", "must be in (0, 1]", "use e.g. 0.9")
        if p.kv_tier2_shared and not (p.kv_tier2_bytes > 0 and p.prefix_caching):
            raise InputError(f"scenario/{scen.name}", f"pools.{name}.kv_tier2_shared",
                             "needs prefix_caching: true and kv_tier2_bytes > 0 (a shared tier of no size holds nothing)",
                             "set both, or drop kv_tier2_shared")
    batching = dict(d.get("batching") or {})
    bname = str(batching.pop("name", ""))
    if bname not in POLICIES:
        raise InputError("conf/batching", "name", f"unknown batching policy {bname!r}", f"use one of: {', '.join(POLICIES)}")
    router = dict(d.get("router") or {})
    rname = str(router.pop("name", ""))
    if rname not in ROUTERS:
        raise InputError("conf/router", "name", f"unknown router {rname!r}", f"use one of: {', '.join(ROUTERS)}")
    autoscaler = dict(d.get("autoscaler") or {"name": "fixed"})
    aname = str(autoscaler.pop("name", ""))
    from sim.core.fleet.autoscaler import AUTOSCALERS
    if aname not in AUTOSCALERS:
        raise InputError("conf/autoscaler", "name", f"unknown autoscaler {aname!r}", f"use one of: {', '.join(AUTOSCALERS)}")
    for name, p in pools.items():
        if p.role not in ("unified", "prefill", "decode"):
            raise InputError(f"scenario/{scen.name}", f"pools.{name}.role", f"unknown role {p.role!r}",
                             "use one of: unified, prefill, decode")
        if p.role == "prefill" and (p.decode_pool not in pools or pools[p.decode_pool].role != "decode"):
            raise InputError(f"scenario/{scen.name}", f"pools.{name}.decode_pool",
                             f"{p.decode_pool!r} is not a decode-role pool of this scenario",
                             "name a pool with role: decode")
        if p.batching_policy is not None and p.batching_policy not in POLICIES:
            raise InputError(f"scenario/{scen.name}", f"pools.{name}.batching_policy",
                             f"unknown batching policy {p.batching_policy!r}", f"use one of: {', '.join(POLICIES)}")
        _check_can_serve(f"scenario/{scen.name}", name, p, aname)
    slo = _slo(build(SloConfig, scen.slo, f"scenario/{scen.name}: slo"), f"scenario/{scen.name}")
    cost = build(CostConfig, d.get("cost"), "conf/cost")
    if cost.kind not in ("roofline", "constant"):
        raise InputError("conf/cost", "kind", f"unknown cost model {cost.kind!r}", "use one of: roofline, constant")
    run = RunConfig(
        seed=_seed(d.get("seed", 0)), scenario=scen, pools=pools, slo=slo,
        batching_name=bname, batching=batching, router_name=rname, router=router,
        autoscaler_name=aname, autoscaler=autoscaler,
        cost=cost, metrics=build(MetricsConfig, d.get("metrics"), "metrics"),
        fast_forward=bool(d.get("fast_forward", True)),
        calibration=d.get("calibration"),
        engine=dict(d.get("engine") or {"name": "generic"}),
    )
    from sim.resolve import resolve_fleet, resolve_pools  # (they build on the typed config above)

    return dataclasses.replace(run, setups=resolve_pools(run), fleet=resolve_fleet(run))
