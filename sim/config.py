"""The loader: a composed Hydra config turned into the run's records (inferplan/config/run.py `RunConfig`),
checked and resolved once, so that a run reads nothing from disk and every program reads the same records.

`load_run_config` checks the top-level groups and the scenario's scalar settings here, then resolves each pool's
file-backed inputs and the fleet above them (sim/resolve.py). Every refusal is one `InputError` line naming the
file or group, the key, the problem and the fix.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from omegaconf import DictConfig, OmegaConf

from inferplan.config.build import build
from inferplan.config.run import (POOL_BLOCKS, ClassTarget, CostConfig, MetricsConfig, PoolConfig, PriceSheet,
                                  RunConfig, ScenarioConfig, SloConfig, instance_bounds)
from inferplan.errors import InputError
from sim.core.instance.batching import POLICIES
from sim.core.router import ROUTERS
from sim.resolve import Raw, group_autoscaler, group_batching, group_router, resolve_fleet, resolve_pools

# Blocks of the scenario parsed into records of their own (the pools, SLO, and what sits above the pools).
SCENARIO_BLOCKS = ("pools", "slo", "placement", "overload", "rolling_update", "pricing")


def _plain(cfg) -> Any:
    return OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg


def _group(d: dict, key: str, default: dict) -> tuple[str, dict]:
    """A group's (name, parameters) from the composed config."""
    group = dict(d.get(key) or default)
    return str(group.pop("name", "")), group


def _check_can_serve(where: str, name: str, p: PoolConfig, scaler: str) -> None:
    """A pool must be able to hold an instance at some point: bounds in order, and a fixed-size pool not empty."""
    lo, hi = instance_bounds(p)
    if lo < 0 or lo > hi:
        raise InputError(where, f"pools.{name}.min_instances", f"needs 0 <= min_instances <= max_instances, got "
                         f"{lo} and {hi}", "fix the bounds")
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


def _slo(raw: Any, where: str) -> SloConfig:
    """SLO targets are latencies a request can meet: every TTFT and TPOT target > 0 s, served fraction in (0, 1]."""
    raw = dict(raw or {})
    classes = raw.pop("classes", {})
    slo = build(SloConfig, raw, f"{where}: slo")
    targets = {"slo.ttft_p99_s": slo.ttft_p99_s, "slo.tpot_p99_s": slo.tpot_p99_s}
    if not isinstance(classes, dict):
        raise InputError(where, "slo.classes", f"must be a mapping, got {classes!r}",
                         "write `classes: {<class>: {ttft_p99_s: ..., tpot_p99_s: ...}}`")
    for name, c in classes.items():
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
    return dataclasses.replace(slo, classes=tuple(
        ClassTarget(str(name), c.get("ttft_p99_s"), c.get("tpot_p99_s")) for name, c in classes.items()))


def _scenario(raw: Any) -> tuple[ScenarioConfig, dict]:
    """The scenario's own settings, and its blocks (SCENARIO_BLOCKS) for the pools' and the fleet's resolution."""
    raw = dict(raw or {})
    blocks = {k: raw.pop(k) for k in SCENARIO_BLOCKS if k in raw}
    sheet = raw.pop("price_sheet", None)
    scen = build(ScenarioConfig, raw, "scenario", extra_keys=(*SCENARIO_BLOCKS, "price_sheet"))
    if sheet:
        scen = dataclasses.replace(scen, price_sheet=build(PriceSheet, sheet, f"scenario/{scen.name}: price_sheet"))
    return scen, blocks


def _pool(name: str, raw: Any, where: str) -> tuple[PoolConfig, dict]:
    """A pool's scalar settings (`PoolConfig`) and its blocks (POOL_BLOCKS), parsed by sim/resolve.py."""
    if not isinstance(raw, dict):
        raise InputError(where, f"pools.{name}", f"must be a mapping of pool settings, got {raw!r}",
                         "write {hardware: ..., model: ...}")
    raw = dict(raw)
    blocks = {k: raw.pop(k) for k in POOL_BLOCKS if k in raw}
    p = build(PoolConfig, raw, f"{where}: pools.{name}", extra_keys=POOL_BLOCKS, hidden=("has_deployment",))
    return dataclasses.replace(p, has_deployment=bool(blocks.get("deployment"))), blocks


def load_run_config(cfg) -> RunConfig:
    """Validate and resolve a composed config (DictConfig or plain dict) into a `RunConfig`."""
    d = _plain(cfg)
    allowed = {"seed", "scenario", "batching", "router", "autoscaler", "cost", "metrics", "fast_forward",
               "calibration", "engine", "hydra", "check"}  # check: the CLI's gate (sim/__main__.py), not the run's
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise InputError("conf/config.yaml", unknown[0], "unknown top-level key", f"valid keys: {', '.join(sorted(allowed - {'hydra'}))}")
    scen, blocks = _scenario(d.get("scenario"))
    where = f"scenario/{scen.name}"
    raw_pools = blocks.get("pools")
    if not isinstance(raw_pools, dict) or not raw_pools:
        raise InputError(where, "pools", "needs at least one pool", "add pools: {name: {hardware: ..., model: ...}}")
    parsed = {str(k): _pool(str(k), v, where) for k, v in raw_pools.items()}
    pools = {name: p for name, (p, _) in parsed.items()}
    for name, p in pools.items():
        if p.instances < 0 or p.tp < 1:
            raise InputError(where, f"pools.{name}", "instances must be >= 0 and tp >= 1", "fix the counts")
        if not 0 < p.gpu_memory_utilization <= 1:
            raise InputError(where, f"pools.{name}.gpu_memory_utilization", "must be in (0, 1]", "use e.g. 0.9")
        if p.kv_tier2_shared and not (p.kv_tier2_bytes > 0 and p.prefix_caching):
            raise InputError(where, f"pools.{name}.kv_tier2_shared",
                             "needs prefix_caching: true and kv_tier2_bytes > 0 (a shared tier of no size holds nothing)",
                             "set both, or drop kv_tier2_shared")
    bname, batching = _group(d, "batching", {})
    if bname not in POLICIES:
        raise InputError("conf/batching", "name", f"unknown batching policy {bname!r}", f"use one of: {', '.join(POLICIES)}")
    rname, router = _group(d, "router", {})
    if rname not in ROUTERS:
        raise InputError("conf/router", "name", f"unknown router {rname!r}", f"use one of: {', '.join(ROUTERS)}")
    aname, autoscaler = _group(d, "autoscaler", {"name": "fixed"})
    from sim.core.fleet.autoscaler import AUTOSCALERS
    if aname not in AUTOSCALERS:
        raise InputError("conf/autoscaler", "name", f"unknown autoscaler {aname!r}", f"use one of: {', '.join(AUTOSCALERS)}")
    for name, p in pools.items():
        if p.role not in ("unified", "prefill", "decode"):
            raise InputError(where, f"pools.{name}.role", f"unknown role {p.role!r}",
                             "use one of: unified, prefill, decode")
        if p.role == "prefill" and (p.decode_pool not in pools or pools[p.decode_pool].role != "decode"):
            raise InputError(where, f"pools.{name}.decode_pool",
                             f"{p.decode_pool!r} is not a decode-role pool of this scenario",
                             "name a pool with role: decode")
        if p.batching_policy is not None and p.batching_policy not in POLICIES:
            raise InputError(where, f"pools.{name}.batching_policy",
                             f"unknown batching policy {p.batching_policy!r}", f"use one of: {', '.join(POLICIES)}")
        own = parsed[name][1].get("autoscaler")
        _check_can_serve(where, name, p, str((own or {}).get("name", aname)))
    slo = _slo(blocks.get("slo"), where)
    cost = build(CostConfig, d.get("cost"), "conf/cost")
    if cost.kind not in ("roofline", "constant"):
        raise InputError("conf/cost", "kind", f"unknown cost model {cost.kind!r}", "use one of: roofline, constant")
    for op, scale in cost.efficiency_scale.items():  # (the roofline's pricer divides measured latencies by it)
        try:
            positive = float(scale) > 0
        except (TypeError, ValueError):
            positive = False
        if not positive:
            raise InputError("conf/cost", "efficiency_scale", f"efficiency_scale.{op} must be > 0, got {scale}",
                             "give positive multipliers")
    raw = Raw(scenario=scen.name, pools=pools, blocks={name: b for name, (_, b) in parsed.items()},
              batching_name=bname, batching=batching, router_name=rname, router=router, autoscaler_name=aname,
              autoscaler=autoscaler, engine=dict(d.get("engine") or {"name": "generic"}), cost=cost,
              placement=dict(blocks.get("placement") or {}), overload=dict(blocks.get("overload") or {}),
              rolling_update=dict(blocks.get("rolling_update") or {}), pricing=dict(blocks.get("pricing") or {}))
    seed = _seed(d.get("seed", 0))
    metrics = build(MetricsConfig, d.get("metrics"), "metrics")
    setups, fleet = resolve_pools(raw), resolve_fleet(raw)  # (each pool's refusals first, as it names the pool)
    return RunConfig(seed=seed, scenario=scen, pools=pools, slo=slo, batching=group_batching(raw),
                     router=group_router(raw), autoscaler=group_autoscaler(raw), cost=cost, metrics=metrics,
                     setups=setups, fleet=fleet, fast_forward=bool(d.get("fast_forward", True)),
                     calibration=d.get("calibration"))
