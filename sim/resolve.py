"""The file-backed parts of a configuration, resolved once at load: what each pool is built from.

`load_run_config` (sim/config.py) ends here. Per pool: the hardware and model specs (conf/hardware, conf/model),
the engine preset with its memory defaults (conf/engine), the batching parameters (the batching group's, or the
defaults of a pool's own policy from conf/batching), the parsed deployment (conf/deployment presets), the
measured profile (calibrate/profiles), the GPU generation's fitted efficiency forms (conf/cost/generations), and
its failures and pricing (sim/failure_config.py).
Above the pools (`FleetSetup`): router parameters, placement and its routes, the overload ladder, each pool's
autoscaler, each constructed once here to check it. Everything that can be refused is refused here, before a run
starts, and nothing reads a file during one. What the core receives is typed: each registered extension
(batching policy, router, placement, autoscaler) as an `inferplan.component.Component` (name + frozen keyword
parameters), the cold start as `ColdStart`, the overload ladder as `OverloadConfig`; every refusal goes through
`checked` (one `InputError` form: file or scenario, field, reason, fix). No plain dict or list reaches
the core: a pool's scalar settings are a `PoolSpec`, its engine preset an `EnginePreset` (what depends on the
pool's KV capacity is a method of it), and a parameter holding a block (a placement's `routes`, `default` and
`class_slo`, the scheduled autoscaler's `plan`) is parsed into typed frozen records (`NESTED`).
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
from scenarios.config_reader import ConfigReader
from sim.config import CostConfig, PoolConfig, PoolSpec, build
from sim.failure_config import failure_plan, pool_price, redundancy
from sim.core.cost.deployment import Deployment, parse_deployment
from sim.core.cost.factory import PoolPricing, build_pool_pricing, resolve_profile
from sim.core.fleet.autoscaler import ScalerContext, make_autoscaler
from sim.core.fleet.autoscaler.scheduled import PlanStep
from sim.core.fleet.billing import PoolPrice
from sim.core.fleet.cold_start import ColdStart
from sim.core.fleet.failures import FailurePlan
from sim.core.fleet.overload import OverloadConfig
from sim.core.fleet.placement import PLACEMENTS, ClassSlo, Route
from sim.core.fleet.rolling_update import RollingPlan
from sim.core.instance.engine import (DOC_KEYS, MEMORY_KEYS, POLICY_KEYS, RULE_KEYS, EnginePreset,
                                      graph_sizes)
from sim.core.instance.batching import make_policy
from sim.core.instance.kv_cache import BlockManager
from sim.core.router import make_router


@dataclass(frozen=True)
class PoolSetup:
    """One pool's resolved inputs. `pool` is its config's settings with an engine preset's memory defaults
    applied."""

    pool: PoolSpec
    hardware: HardwareSpec
    model: ModelSpec
    engine: EnginePreset         # the engine preset (`generic`: the batching group decides)
    batching: Component          # the batching policy and its parameters (checked by building it once)
    token_budget: int            # tokens per iteration the memory plan reserves activations for
    cold_start: ColdStart
    deployment: Deployment
    profile: Any                 # calibrate.profile.Profile, or None (analytical)
    generation: Generation | None
    failures: FailurePlan = FailurePlan()  # when its instances fail (none by default)
    price: PoolPrice = PoolPrice()         # how its instances are bought (on demand by default)


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
    return build_pool_pricing(model, hw, PoolSpec.of(p), cost, token_budget=token_budget, where=where, dep=dep,
                              profile=profile, generation=generation)


ENGINE_DIR = CONF_DIR / "engine"


def engine_presets() -> list[str]:
    return sorted(p.stem for p in ENGINE_DIR.glob("*.yaml"))


def _engine_spec(pool_engine, group_engine: dict | None, where: str) -> dict:
    """The preset a pool runs, as merged yaml: its own `engine:` (name or mapping with overrides) over the
    group's (the preset's file read when the pool names another preset than the group)."""
    spec = dict(group_engine or {"name": "generic"})
    if pool_engine is not None:
        own = {"name": pool_engine} if isinstance(pool_engine, str) else dict(pool_engine)
        name = own.get("name", spec.get("name"))
        if name != spec.get("name"):
            path = ENGINE_DIR / f"{name}.yaml"
            if not path.is_file():
                raise InputError(where, "engine", f"unknown engine preset {name!r}",
                                 f"use one of: {', '.join(engine_presets())}")
            spec = yaml.safe_load(path.read_text()) or {}
        spec.update(own)
    if spec.get("name", "generic") == "generic":
        extra = sorted(set(spec) - {"name"})
        if extra:
            raise InputError(where, f"engine.{extra[0]}", "the generic engine has no settings (the batching group "
                             "decides)", "choose a preset first: engine=vllm_v0|vllm_v1|sglang|trtllm")
        return {"name": "generic"}
    unknown = sorted(set(spec) - set(POLICY_KEYS) - set(MEMORY_KEYS) - set(RULE_KEYS) - set(DOC_KEYS))
    if unknown:
        raise InputError(where, f"engine.{unknown[0]}", "unknown engine key",
                         f"valid keys: {', '.join(POLICY_KEYS + MEMORY_KEYS)}")
    return spec


def engine_preset(pool_engine, group_engine: dict | None, where: str) -> EnginePreset:
    """A pool's `EnginePreset`, typed (each key coerced to its field's type, or refused in one line)."""
    spec = _engine_spec(pool_engine, group_engine, where)
    if "cuda_graph_sizes" in spec:
        rule = spec["cuda_graph_sizes"]
        spec["cuda_graph_sizes"] = checked(where, "engine.cuda_graph_sizes", "write {small: [1, 2, 4], step: 8, "
                                           "max: 256}", lambda: graph_sizes(rule))
    if "gpu_memory_utilization_by_tp" in spec:
        by_tp = spec["gpu_memory_utilization_by_tp"] or {}
        spec["gpu_memory_utilization_by_tp"] = checked(
            where, "engine.gpu_memory_utilization_by_tp", "write {tp: fraction, ...}, e.g. {1: 0.88, 8: 0.83}",
            lambda: tuple((int(k), float(v)) for k, v in by_tp.items()))
    if spec.get("name") != "generic" and "chunked_prefill" not in spec:
        raise InputError(f"conf/engine/{spec.get('name')}.yaml", "chunked_prefill", "missing",
                         "add `chunked_prefill: true|false`")
    # (a `null` leaves the field at its default: None where a rule applies, else EngineBatching's value)
    return build(EnginePreset, {k: v for k, v in spec.items() if v is not None}, f"{where}: engine")


def resolve_pool(name: str, p: PoolConfig, run) -> PoolSetup:
    where = f"scenario/{run.scenario.name}: pools.{name}"
    hardware, model = load_hardware(p.hardware), load_model(p.model)
    engine = engine_preset(p.engine, run.engine, where)
    spec = PoolSpec.of(p)
    if not engine.generic:  # the engine's memory defaults replace the pool's
        util, block = engine.memory_settings(p.tp, p.gpu_memory_utilization, p.block_size_tokens)
        spec = dataclasses.replace(spec, gpu_memory_utilization=util, block_size_tokens=block,
                                   kv_free_memory_fraction=engine.kv_free_fraction())
    batching_name = p.batching_policy or run.batching_name
    base = run.batching if batching_name == run.batching_name else _policy_defaults(batching_name)
    batching = typed_params({**base, **(p.batching or {})}, f"conf/batching/{batching_name}.yaml", "batching")
    token_budget = int(batching.get("token_budget", batching.get("max_batch_tokens", 8192)))
    if not engine.generic:  # the engine's scheduler runs: checked once, over one block, on this hardware
        token_budget = engine.token_budget(model.max_context_tokens)
        checked(f"conf/engine/{engine.name}.yaml", "parameters", "fix the preset key or its engine.<key>= override",
                lambda: engine.batching(BlockManager(1, spec.block_size_tokens), model.max_context_tokens,
                                        model.max_context_tokens, hardware.host_link_bandwidth_bytes_per_s))
    else:  # the batching policy runs (an engine preset would replace it)
        checked(f"conf/batching/{batching_name}.yaml", "parameters", "remove or rename the key",
                lambda: make_policy(batching_name, BlockManager(1, spec.block_size_tokens), dict(batching)))
    cold_start = checked(where, "cold_start", "valid keys: " + ", ".join(ColdStart.__dataclass_fields__),
                         lambda: ColdStart(**(p.cold_start or {})))
    dep, profile, generation = pricing_inputs(p, hardware, run.cost, where)
    file = f"scenario/{run.scenario.name}"
    price = pool_price(p.pricing, p.reserved_discount, p.spot_discount, p.spot_interruption_mtbf_s,
                       run.scenario.pricing, file, f"pools.{name}")
    failures = failure_plan(p.failures, p.spot_interruption_mtbf_s, file, f"pools.{name}")
    redundancy(p.redundancy, file, f"pools.{name}")
    return PoolSetup(spec, hardware, model, engine, Component.of(batching_name, batching),
                     token_budget, cold_start, dep, profile, generation, failures, price)


def checked(where: str, field: str, fix: str, build):
    """`build()`, its refusal (TypeError: unknown or missing key; ValueError: a value out of range; KeyError:
    an unknown name) turned into the one `InputError` form: file or scenario, field, reason, fix."""
    try:
        return build()
    except (KeyError, TypeError, ValueError) as err:
        reason = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)  # (a KeyError quotes)
        raise InputError(where, field, reason, fix) from None


def _pools(value, file: str, path: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InputError(file, path, f"must be a list of pool names, got {value!r}", "write [pool_a, pool_b]")
    return tuple(value)


def _routes(value, file: str, path: str) -> tuple[Route, ...]:
    if not isinstance(value, dict):
        raise InputError(file, path, f"must map request classes to pools, got {value!r}",
                         "write {class_name: [pool, ...]}")
    return tuple(Route(str(cls), _pools(pools, file, f"{path}.{cls}")) for cls, pools in value.items())


def _class_slo(value, file: str, path: str) -> tuple[ClassSlo, ...]:
    if not isinstance(value, dict):
        raise InputError(file, path, f"must map request classes to P99 bounds, got {value!r}",
                         "write {class_name: {ttft_p99_s: ..., tpot_p99_s: ...}}")
    out = []
    for cls, bounds in value.items():
        r = ConfigReader(bounds, file=file, where=f"{path}.{cls}")
        out.append(ClassSlo(str(cls), r.optional_number("ttft_p99_s", minimum=0.0),
                            r.optional_number("tpot_p99_s", minimum=0.0)))
        r.finish()
    return tuple(out)


def _plan(value, file: str, path: str) -> tuple[PlanStep, ...]:
    steps = []
    for step in ConfigReader({"plan": value}, file=file, where=path.rpartition(".")[0]).mapping_list("plan"):
        step.has("at_s"), step.has("instances")
        step.finish()  # (an unknown key first: it may be a misspelling of a missing one)
        steps.append(PlanStep(step.number("at_s"), step.integer("instances")))
    return tuple(steps)


# Component parameters that hold a block, by parameter name: each parsed into typed frozen records at load.
NESTED = {"routes": _routes, "default": _pools, "class_slo": _class_slo, "plan": _plan}


def typed_params(params: dict, file: str, where: str) -> dict:
    """A component's parameters with every block parsed by its `NESTED` parser; a block under any other key is
    refused (the core takes single values or typed records only)."""
    out = {}
    for key, value in params.items():
        if isinstance(value, (dict, list, tuple)):
            if key not in NESTED:
                raise InputError(file, f"{where}.{key}", f"must be a single value, got {value!r}",
                                 "give a number, string or boolean")
            value = NESTED[key](value, file, f"{where}.{key}")
        out[key] = value
    return out


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
    autoscalers: tuple[tuple[str, Component], ...]  # (pool name, its autoscaler), in the scenario's pool order
    rolling_update: RollingPlan | None = None

    def autoscaler(self, pool: str) -> Component:
        return next(c for name, c in self.autoscalers if name == pool)


def _placement(run, where: str) -> Component:
    cfg = dict(run.scenario.placement or {})
    name = str(cfg.pop("name", "static"))
    entry = [n for n, p in run.pools.items() if p.role != "decode"]
    cfg.setdefault("default", entry[:1])
    cfg.setdefault("routes", {})
    params = typed_params(cfg, where, "placement")
    for cls, cands in [("default", params["default"]), *((r.request_class, r.pools) for r in params["routes"])]:
        if not cands or any(c not in run.pools or run.pools[c].role == "decode" for c in cands):
            raise InputError(where, f"placement.routes.{cls}", f"{list(cands)!r} must list serving pools",
                             f"use pools among: {', '.join(entry)}")
    if name not in PLACEMENTS:
        raise InputError(where, "placement.name", f"unknown placement {name!r}", f"use one of: {', '.join(PLACEMENTS)}")
    checked(where, "placement", "see sim/core/fleet/placement.py", lambda: PLACEMENTS[name](**params))
    return Component.of(name, params)


def resolve_fleet(run) -> FleetSetup:
    where = f"scenario/{run.scenario.name}"
    params = typed_params(dict(run.router), f"conf/router/{run.router_name}.yaml", "router")
    cap = params.pop("max_outstanding_per_instance", None)
    checked(f"conf/router/{run.router_name}.yaml", "parameters", "remove or rename the key",
            lambda: make_router(run.router_name, dict(params)))
    raw = dict(run.scenario.overload)
    if raw.get("watch_pools") is not None:  # (typed before the record is made: compiled, it checks the field's type)
        raw["watch_pools"] = _pools(raw["watch_pools"], where, "overload.watch_pools")
    overload = checked(where, "overload", f"valid keys: {', '.join(OverloadConfig.__dataclass_fields__)}",
                       lambda: OverloadConfig(**raw))
    if overload.fallback_pool is not None and overload.fallback_pool not in run.pools:
        raise InputError(where, "overload.fallback_pool", f"unknown pool {overload.fallback_pool!r}",
                         f"use one of: {', '.join(run.pools)}")
    scalers = []
    for name, p in run.pools.items():
        spec = dict(p.autoscaler or {"name": run.autoscaler_name, **run.autoscaler})
        sname = str(spec.pop("name", run.autoscaler_name))
        spec = typed_params(spec, f"{where}: pools.{name}" if p.autoscaler else f"conf/autoscaler/{sname}.yaml",
                            "autoscaler")
        checked(f"{where}: pools.{name}", "autoscaler", "see conf/autoscaler/ for each policy's keys",
                lambda: make_autoscaler(sname, dict(spec), ScalerContext()))
        scalers.append((name, Component.of(sname, spec)))
    return FleetSetup(Component.of(run.router_name, params), None if cap is None else int(cap),
                      _placement(run, where), overload, tuple(scalers),
                      RollingPlan.parse(run.scenario.rolling_update, list(run.pools), where)
                      if run.scenario.rolling_update else None)
