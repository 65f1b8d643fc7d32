"""The file-backed parts of a configuration, resolved once at load: what each pool is built from.

`load_run_config` (sim/config.py) ends here. Per pool: the hardware and model specs (conf/hardware, conf/model),
the engine preset with its memory defaults (conf/engine), the batching parameters (the batching group's, or the
defaults of a pool's own policy from conf/batching), the parsed deployment (conf/deployment presets), the
measured profile (calibrate/profiles) and the GPU generation's fitted efficiency forms (conf/cost/generations).
Above the pools (`FleetSetup`): router parameters, placement and its routes, the overload ladder, each pool's
autoscaler, each constructed once here to check it. Everything that can be refused is refused here, before a run
starts, and nothing reads a file during one. What the core receives is typed: each registered extension (batching
policy, engine preset, router, placement, autoscaler) as an `inferplan.component.Component` (name + frozen
keyword parameters), the cold start as `ColdStart`, the overload ladder as `OverloadConfig`; every refusal goes
through `checked` (one `InputError` form: file or scenario, field, reason, fix).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import yaml

from calibrate.efficiency import Generation, hardware_generation, load_generation
from inferplan.component import Component
from inferplan.errors import InputError
from inferplan.specs import CONF_DIR, HardwareSpec, ModelSpec, load_hardware, load_model
from sim.config import CostConfig, PoolConfig
from sim.core.cost.deployment import Deployment, parse_deployment
from sim.core.cost.factory import PoolPricing, build_pool_pricing, resolve_profile
from sim.core.fleet.autoscaler import ScalerContext, make_autoscaler
from sim.core.fleet.cold_start import ColdStart
from sim.core.fleet.overload import OverloadConfig
from sim.core.fleet.placement import PLACEMENTS
from sim.core.fleet.rolling_update import RollingPlan
from sim.core.instance import engine as engine_presets
from sim.core.instance.batching import make_policy
from sim.core.instance.kv_cache import BlockManager
from sim.core.router import make_router


@dataclass(frozen=True)
class PoolSetup:
    """One pool's resolved inputs. `pool` is its config with an engine preset's memory defaults applied."""

    pool: PoolConfig
    hardware: HardwareSpec
    model: ModelSpec
    engine: Component            # the engine preset and its keys (`generic`: the batching group decides)
    batching: Component          # the batching policy and its parameters (checked by building it once)
    token_budget: int            # tokens per iteration the memory plan reserves activations for
    cold_start: ColdStart
    deployment: Deployment
    profile: Any                 # calibrate.profile.Profile, or None (analytical)
    generation: Generation | None


def _policy_defaults(policy: str) -> dict:
    """The parameters of `conf/batching/<policy>.yaml` (a pool choosing its own batching policy)."""
    data = yaml.safe_load((CONF_DIR / "batching" / f"{policy}.yaml").read_text()) or {}
    data.pop("name", None)
    return data


def pricing_inputs(p: PoolConfig, hw: HardwareSpec, cost: CostConfig,
                   where: str) -> tuple[Deployment, Any, Generation | None]:
    """(deployment, profile, generation) of a pool; the last two only for the roofline cost model."""
    dep = parse_deployment(p.deployment, tp=p.tp, weights_dtype=p.weights_dtype, where=where)
    if cost.kind == "constant":
        return dep, None, None
    return dep, resolve_profile(cost.profile, hw), load_generation(hardware_generation(hw.source))


def pool_pricing(model: ModelSpec, hw: HardwareSpec, p: PoolConfig, cost: CostConfig, *, token_budget: int,
                 where: str) -> PoolPricing:
    """A pool's pricing from its config alone (tools and tests that price a pool outside a run)."""
    dep, profile, generation = pricing_inputs(p, hw, cost, where)
    return build_pool_pricing(model, hw, p, cost, token_budget=token_budget, where=where, dep=dep,
                              profile=profile, generation=generation)


def resolve_pool(name: str, p: PoolConfig, run) -> PoolSetup:
    where = f"scenario/{run.scenario.name}: pools.{name}"
    hardware, model = load_hardware(p.hardware), load_model(p.model)
    engine = engine_presets.resolve(p.engine, run.engine, where)
    if engine["name"] != "generic":  # the engine's memory defaults replace the pool's
        util, block = engine_presets.memory_settings(engine, p.tp, p.gpu_memory_utilization, p.block_size_tokens)
        p = dataclasses.replace(p, gpu_memory_utilization=util, block_size_tokens=block,
                                kv_free_memory_fraction=float(engine.get("kv_free_memory_fraction") or 1.0))
    batching_name = p.batching_policy or run.batching_name
    base = run.batching if batching_name == run.batching_name else _policy_defaults(batching_name)
    batching = {**base, **(p.batching or {})}
    token_budget = int(batching.get("token_budget", batching.get("max_batch_tokens", 8192)))
    if engine["name"] != "generic":
        token_budget = int(engine.get("max_num_batched_tokens") or max(model.max_context_tokens, 2048))
    else:  # the batching policy runs (an engine preset would replace it; its keys are checked by `resolve`)
        checked(f"conf/batching/{batching_name}.yaml", "parameters", "remove or rename the key",
                lambda: make_policy(batching_name, BlockManager(1, p.block_size_tokens), dict(batching)))
    cold_start = checked(where, "cold_start", "valid keys: " + ", ".join(ColdStart.__dataclass_fields__),
                         lambda: ColdStart(**(p.cold_start or {})))
    dep, profile, generation = pricing_inputs(p, hardware, run.cost, where)
    return PoolSetup(p, hardware, model, Component.of(engine["name"], engine), Component.of(batching_name, batching),
                     token_budget, cold_start, dep, profile, generation)


def checked(where: str, field: str, fix: str, build):
    """`build()`, its refusal (TypeError: unknown or missing key; ValueError: a value out of range; KeyError:
    an unknown name) turned into the one `InputError` form: file or scenario, field, reason, fix."""
    try:
        return build()
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(where, field, str(err).strip("'\""), fix) from None


def resolve_pools(run) -> dict[str, PoolSetup]:
    return {name: resolve_pool(name, p, run) for name, p in run.pools.items()}


@dataclass(frozen=True)
class FleetSetup:
    """What sits above the pools, resolved and checked at load: the router's parameters, the placement policy
    and its routes, the overload ladder, and each pool's autoscaler (name, parameters)."""

    router: Component
    max_outstanding: int | None
    placement: Component
    overload: OverloadConfig
    autoscalers: dict[str, Component]
    rolling_update: RollingPlan | None = None


def _placement(run, where: str) -> Component:
    cfg = dict(run.scenario.placement or {})
    name = str(cfg.pop("name", "static"))
    entry = [n for n, p in run.pools.items() if p.role != "decode"]
    cfg.setdefault("default", entry[:1])
    cfg.setdefault("routes", {})
    for cls, cands in [("default", cfg["default"]), *cfg["routes"].items()]:
        if not cands or any(c not in run.pools or run.pools[c].role == "decode" for c in cands):
            raise InputError(where, f"placement.routes.{cls}", f"{cands!r} must list serving pools",
                             f"use pools among: {', '.join(entry)}")
    if name not in PLACEMENTS:
        raise InputError(where, "placement.name", f"unknown placement {name!r}", f"use one of: {', '.join(PLACEMENTS)}")
    checked(where, "placement", "see sim/core/fleet/placement.py", lambda: PLACEMENTS[name](**cfg))
    return Component.of(name, cfg)


def resolve_fleet(run) -> FleetSetup:
    where = f"scenario/{run.scenario.name}"
    params = dict(run.router)
    cap = params.pop("max_outstanding_per_instance", None)
    checked(f"conf/router/{run.router_name}.yaml", "parameters", "remove or rename the key",
            lambda: make_router(run.router_name, dict(params)))
    overload = checked(where, "overload", f"valid keys: {', '.join(OverloadConfig.__dataclass_fields__)}",
                       lambda: OverloadConfig(**run.scenario.overload))
    if overload.fallback_pool is not None and overload.fallback_pool not in run.pools:
        raise InputError(where, "overload.fallback_pool", f"unknown pool {overload.fallback_pool!r}",
                         f"use one of: {', '.join(run.pools)}")
    scalers = {}
    for name, p in run.pools.items():
        spec = dict(p.autoscaler or {"name": run.autoscaler_name, **run.autoscaler})
        sname = str(spec.pop("name", run.autoscaler_name))
        checked(f"{where}: pools.{name}", "autoscaler", "see conf/autoscaler/ for each policy's keys",
                lambda: make_autoscaler(sname, dict(spec), ScalerContext()))
        scalers[name] = Component.of(sname, spec)
    return FleetSetup(Component.of(run.router_name, params), None if cap is None else int(cap),
                      _placement(run, where), overload, scalers,
                      RollingPlan.parse(run.scenario.rolling_update, list(run.pools), where)
                      if run.scenario.rolling_update else None)
