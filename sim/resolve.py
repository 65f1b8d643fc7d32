"""The file-backed parts of a configuration, resolved once at load: what each pool is built from.

`load_run_config` (sim/config.py) ends here, and fills the records of inferplan/config/run.py. Per pool
(`PoolSetup`): the hardware and model specs (conf/hardware, conf/model), the engine preset with its memory
defaults (conf/engine), the batching parameters (the batching group's, or the defaults of a pool's own policy from
conf/batching), the scheduler settings with the source of each (`scheduler_settings`: an engine preset's keys, or
the batching policy's parameters), the parsed deployment (conf/deployment presets), the measured profile
(calibrate/profiles), the GPU generation's fitted efficiency forms (conf/cost/generations), and its failures and
pricing (sim/failure_config.py). Above the pools (`FleetSetup`): router parameters, placement and its routes, the
overload ladder, each pool's autoscaler, the rolling update, each constructed once here to check it. Everything
that can be refused is refused here, before a run starts, and nothing reads a file during one; every refusal goes
through `checked` or names the file and key itself (one `InputError` form: file or scenario, field, reason, fix).
No plain dict or list reaches the core: each registered extension is a `Component` (name + frozen keyword
parameters), and a parameter holding a block (a placement's `routes`, `default` and `class_slo`, the scheduled
autoscaler's `plan`) is parsed into typed frozen records (`NESTED`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from calibrate.efficiency import Generation, hardware_generation, load_generation
from inferplan.config.build import build
from inferplan.config.component import Component
from inferplan.config.deployment import Deployment
from inferplan.config.engine import DOC_KEYS, MEMORY_KEYS, POLICY_KEYS, RULE_KEYS, EnginePreset, graph_sizes
from inferplan.config.device_defaults import DEVICE_RULES
from inferplan.config.engine_memory import ACCOUNTINGS, FRACTION_RULES
from inferplan.config.fleet import ColdStart, ClassSlo, OverloadConfig, PlanStep, RollingPlan, Route
from inferplan.config.run import (CostConfig, FleetSetup, PoolConfig, PoolSetup, SchedulerSettings, Setting)
from inferplan.config.yaml_files import read_yaml_mapping
from inferplan.errors import InputError, unknown_key
from inferplan.specs import CONF_DIR, HardwareSpec, ModelSpec, load_hardware, load_model
from scenarios.config_reader import ConfigReader
from sim.failure_config import failure_plan, pool_price, redundancy
from sim.core.cost.deployment import parse_deployment
from sim.core.cost.factory import PoolPricing, build_pool_pricing, choose_profile
from sim.core.fleet.autoscaler import ScalerContext, make_autoscaler
from sim.core.fleet.placement import PLACEMENTS
from sim.core.instance.engine import build_scheduler
from sim.core.instance.batching import make_policy
from sim.core.instance.batching.rules import OVERLAPS
from sim.core.instance.kv_cache import BlockManager
from sim.core.router import make_router


@dataclass(frozen=True)
class Raw:
    """The loader's working state between sim/config.py and this module: the checked scalar records and the raw
    blocks of the composed config still to be parsed. It never leaves the loader."""

    scenario: str                            # the scenario's name
    pools: dict[str, PoolConfig]
    blocks: dict[str, dict]                  # pool -> its POOL_BLOCKS as written
    batching_name: str
    batching: dict                           # the batching group's parameters
    router_name: str
    router: dict
    autoscaler_name: str
    autoscaler: dict
    engine: dict                             # the engine group as composed ({name: generic} by default)
    cost: CostConfig
    placement: dict
    overload: dict
    rolling_update: dict
    pricing: dict                            # the scenario's `pricing:` defaults


def _policy_defaults(policy: str) -> dict:
    """The parameters of `conf/batching/<policy>.yaml` (a pool choosing its own batching policy)."""
    data = read_yaml_mapping(CONF_DIR / "batching" / f"{policy}.yaml")
    data.pop("name", None)
    return data


def pricing_inputs(p: PoolConfig, deployment: dict | None, hw: HardwareSpec, cost: CostConfig, where: str,
                   engine: EnginePreset | None = None) -> tuple[Deployment, object, str, Generation | None]:
    """(deployment, measured profile, why that profile, generation) of a pool from its `deployment:` block and
    engine preset; the last three only for the roofline cost model."""
    dep = parse_deployment(deployment, tp=p.tp, weights_dtype=p.weights_dtype, where=where)
    if cost.kind == "constant":
        return dep, None, "", None
    name = "" if engine is None or engine.generic else engine.name
    profile, why = choose_profile(cost.profile, hw, name, "" if engine is None else engine.engine_version or "")
    return dep, profile, why, load_generation(hardware_generation(hw.source))


def pool_pricing(model: ModelSpec, hw: HardwareSpec, p: PoolConfig, cost: CostConfig, *, token_budget: int,
                 where: str, deployment: dict | None = None) -> PoolPricing:
    """A pool's pricing from its config and `deployment:` block alone (tools and tests that price a pool outside
    a run)."""
    dep, profile, _, generation = pricing_inputs(p, deployment, hw, cost, where)
    p = dataclasses.replace(p, has_deployment=bool(deployment))
    return build_pool_pricing(model, hw, p, cost, token_budget=token_budget, where=where, dep=dep,
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
            spec = read_yaml_mapping(path)
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
    for key, allowed in (("mem_fraction_rule", FRACTION_RULES), ("memory_accounting", ACCOUNTINGS),
                         ("device_rule", DEVICE_RULES)):
        if spec.get(key) is not None and spec[key] not in allowed:
            raise InputError(f"conf/engine/{spec.get('name')}.yaml", key, f"{spec[key]!r} is not known",
                             f"one of {', '.join(allowed)}")
    hybrid = spec.get("overlap_linear_attention")
    if hybrid is not None and hybrid not in OVERLAPS:
        raise InputError(f"conf/engine/{spec.get('name')}.yaml", "overlap_linear_attention", f"{hybrid!r} is not "
                         "an overlap mode", f"one of {', '.join(OVERLAPS)}, or null (the preset's `overlap`)")
    if spec.get("name") != "generic" and "chunked_prefill" not in spec:
        raise InputError(f"conf/engine/{spec.get('name')}.yaml", "chunked_prefill", "missing",
                         "add `chunked_prefill: true|false`")
    # (a `null` leaves the field at its default: None where a rule applies, else EngineBatching's value)
    return build(EnginePreset, {k: v for k, v in spec.items() if v is not None}, f"{where}: engine")


def resolve_pool(name: str, p: PoolConfig, raw: Raw) -> PoolSetup:
    where = f"scenario/{raw.scenario}: pools.{name}"
    blocks = raw.blocks.get(name, {})
    hardware, model = load_hardware(p.hardware), load_model(p.model)
    engine = engine_preset(blocks.get("engine"), raw.engine, where).for_model(model.linear_attention is not None)
    if p.memory_accounting not in ACCOUNTINGS:
        raise InputError(f"scenario/{raw.scenario}", f"pools.{name}.memory_accounting",
                         f"{p.memory_accounting!r} is not known", f"one of {', '.join(ACCOUNTINGS)}")
    dep, profile, why, generation = pricing_inputs(p, blocks.get("deployment"), hardware, raw.cost, where, engine)
    engine = engine.on_device(hardware.memory_bytes, p.tp * dep.dp)
    spec = p
    if not engine.generic:  # the engine's memory defaults and accounting replace the pool's
        util, block = engine.memory_settings(p.tp, p.gpu_memory_utilization, p.block_size_tokens,
                                             hardware.memory_bytes, dep.pp, dep.dp)
        spec = dataclasses.replace(spec, gpu_memory_utilization=util, block_size_tokens=block,
                                   kv_free_memory_fraction=engine.kv_free_fraction(),
                                   memory_accounting=engine.memory_accounting,
                                   sampler_peak_bytes=engine.sampler_peak_bytes(model.vocab_size))
    batching_name = p.batching_policy or raw.batching_name
    base = raw.batching if batching_name == raw.batching_name else _policy_defaults(batching_name)
    own = dict(blocks.get("batching") or {})
    batching = typed_params({**base, **own}, f"conf/batching/{batching_name}.yaml", "batching")
    token_budget = int(batching.get("token_budget", batching.get("max_batch_tokens", 8192)))
    if not engine.generic:  # the engine's scheduler runs: checked once, over one block, on this hardware
        checked(f"conf/engine/{engine.name}.yaml", "parameters", "fix the preset key or its engine.<key>= override",
                lambda: build_scheduler(engine, BlockManager(1, spec.block_size_tokens), model.max_context_tokens,
                                        model.max_context_tokens, hardware.host_link_bandwidth_bytes_per_s))
    else:  # the batching policy runs (an engine preset would replace it)
        checked(f"conf/batching/{batching_name}.yaml", "parameters", "remove or rename the key",
                lambda: make_policy(batching_name, BlockManager(1, spec.block_size_tokens), dict(batching)))
    cold = blocks.get("cold_start")
    cold_start = checked(where, "cold_start", "valid keys: " + ", ".join(ColdStart.__dataclass_fields__),
                         lambda: ColdStart(**(cold or {})))
    if not engine.generic:  # the engine's budget, dp of them where each DP rank schedules its own
        token_budget = engine.token_budget(model.max_context_tokens, dep.dp)
    file = f"scenario/{raw.scenario}"
    price = pool_price(p.pricing, p.reserved_discount, p.spot_discount, p.spot_interruption_mtbf_s,
                       raw.pricing, file, f"pools.{name}")
    failures = failure_plan(blocks.get("failures"), p.spot_interruption_mtbf_s, file, f"pools.{name}")
    redundancy(p.redundancy, file, f"pools.{name}")
    scheduler = scheduler_settings(name, p, raw, engine, batching_name, batching, own, model.max_context_tokens)
    return PoolSetup(spec, hardware, model, engine, Component.of(batching_name, batching),
                     token_budget, cold_start, dep, profile, generation, failures, price, scheduler, why)


def scheduler_settings(name: str, p: PoolConfig, raw: Raw, engine: EnginePreset, batching_name: str,
                       batching: dict, own_batching: dict, max_context_tokens: int) -> SchedulerSettings:
    """The one record of a pool's scheduler settings, each with its source and the override that reaches it: an
    engine preset's keys (the pool's own `engine:` mapping over the preset's file) when the pool runs one, else
    its batching policy's parameters (the pool's own `batching:` keys over the group's, or over its own policy's
    defaults file)."""
    where = f"scenario/{raw.scenario}: pools.{name}"
    own_engine = raw.blocks.get(name, {}).get("engine")
    pool_batching = Component.of(batching_name, typed_params(own_batching, where, "batching"))
    if not engine.generic:
        own_keys = set(own_engine) if isinstance(own_engine, dict) else set()
        written = set(_engine_spec(own_engine, raw.engine, where))
        file = f"conf/engine/{engine.name}.yaml"
        out = []
        for key in POLICY_KEYS:
            value = getattr(engine, key)
            if key in own_keys:
                source, override = f"{where}.engine", ""
            elif key in written:
                source, override = file, "" if own_engine is not None else f"engine.{key}"
            else:
                source, override = "default (the engine scheduler's)", "" if own_engine is not None else f"engine.{key}"
            if key in ("max_num_batched_tokens", "cuda_graph_sizes") and engine.device_rule:
                source = f"{file}: device_rule {engine.device_rule}, by the device's memory and tp"
            if value is None and key == "max_num_batched_tokens":
                value, source = engine.token_budget(max_context_tokens), f"{file}: null, max(model context, 2048)"
            elif value is None and key == "max_num_seqs":
                source = f"{file}: null, SGLang's rule over the pool's KV tokens (set when an instance starts)"
            out.append(Setting(key, value if not isinstance(value, tuple) else str(value), source, override))
        return SchedulerSettings(engine.name, tuple(out), own_engine is not None, pool_batching)
    out = []
    for key, value in batching.items():
        if key in own_batching:
            source, override = f"{where}.batching", f"scenario.pools.{name}.batching.{key}"
        elif batching_name != raw.batching_name:
            source, override = f"conf/batching/{batching_name}.yaml", f"++scenario.pools.{name}.batching.{key}"
        else:
            source, override = f"conf/batching/{batching_name}.yaml", f"batching.{key}"
        if isinstance(value, (bool, int, float, str)) or value is None:
            out.append(Setting(key, value, source, override))
    return SchedulerSettings(batching_name, tuple(out), own_engine is not None, pool_batching)


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


def resolve_pools(raw: Raw) -> dict[str, PoolSetup]:
    return {name: resolve_pool(name, p, raw) for name, p in raw.pools.items()}


def _placement(raw: Raw, where: str) -> Component:
    cfg = dict(raw.placement)
    name = str(cfg.pop("name", "static"))
    entry = [n for n, p in raw.pools.items() if p.role != "decode"]
    cfg.setdefault("default", entry[:1])
    cfg.setdefault("routes", {})
    params = typed_params(cfg, where, "placement")
    for cls, cands in [("default", params["default"]), *((r.request_class, r.pools) for r in params["routes"])]:
        if not cands or any(c not in raw.pools or raw.pools[c].role == "decode" for c in cands):
            raise InputError(where, f"placement.routes.{cls}", f"{list(cands)!r} must list serving pools",
                             f"use pools among: {', '.join(entry)}")
    if name not in PLACEMENTS:
        raise InputError(where, "placement.name", f"unknown placement {name!r}", f"use one of: {', '.join(PLACEMENTS)}")
    checked(where, "placement", "see sim/core/fleet/placement.py", lambda: PLACEMENTS[name](**params))
    return Component.of(name, params)


def rolling_plan(cfg: dict, pool_names: list[str], where: str) -> RollingPlan:
    """A scenario's `rolling_update:` as a `RollingPlan`: when, how many at a time, which pools (default: all)."""
    unknown = set(cfg) - {"at_s", "wave_size", "pools"}
    if unknown:
        raise unknown_key(where, f"rolling_update.{sorted(unknown)[0]}", ("at_s", "wave_size", "pools"))
    plan = RollingPlan(float(cfg.get("at_s", 0.0)), int(cfg.get("wave_size", 1)),
                       tuple(cfg.get("pools") or pool_names))
    if plan.wave_size < 1 or any(p not in pool_names for p in plan.pools):
        raise InputError(where, "rolling_update", "wave_size must be >= 1 and pools must exist",
                         f"pools: {', '.join(pool_names)}")
    return plan


def group_batching(raw: Raw) -> Component:
    """The batching group's policy and parameters (each pool's own, resolved, is its `PoolSetup.batching`)."""
    return Component.of(raw.batching_name, typed_params(dict(raw.batching), f"conf/batching/{raw.batching_name}.yaml",
                                                        "batching"))


def group_router(raw: Raw) -> Component:
    return Component.of(raw.router_name, typed_params(dict(raw.router), f"conf/router/{raw.router_name}.yaml", "router"))


def group_autoscaler(raw: Raw) -> Component:
    """The autoscaler group's policy and parameters (a pool with its own `autoscaler:` runs that instead)."""
    return Component.of(raw.autoscaler_name, typed_params(dict(raw.autoscaler),
                                                          f"conf/autoscaler/{raw.autoscaler_name}.yaml", "autoscaler"))


def resolve_fleet(raw: Raw) -> FleetSetup:
    where = f"scenario/{raw.scenario}"
    params = typed_params(dict(raw.router), f"conf/router/{raw.router_name}.yaml", "router")
    cap = params.pop("max_outstanding_per_instance", None)
    checked(f"conf/router/{raw.router_name}.yaml", "parameters", "remove or rename the key",
            lambda: make_router(raw.router_name, dict(params)))
    over = dict(raw.overload)
    if over.get("watch_pools") is not None:
        over["watch_pools"] = _pools(over["watch_pools"], where, "overload.watch_pools")
    overload = checked(where, "overload", f"valid keys: {', '.join(OverloadConfig.__dataclass_fields__)}",
                       lambda: OverloadConfig(**over))
    if overload.fallback_pool is not None and overload.fallback_pool not in raw.pools:
        raise InputError(where, "overload.fallback_pool", f"unknown pool {overload.fallback_pool!r}",
                         f"use one of: {', '.join(raw.pools)}")
    scalers = []
    for name in raw.pools:
        own = raw.blocks.get(name, {}).get("autoscaler")
        spec = dict(own or {"name": raw.autoscaler_name, **raw.autoscaler})
        sname = str(spec.pop("name", raw.autoscaler_name))
        spec = typed_params(spec, f"{where}: pools.{name}" if own else f"conf/autoscaler/{sname}.yaml", "autoscaler")
        checked(f"{where}: pools.{name}", "autoscaler", "see conf/autoscaler/ for each policy's keys",
                lambda: make_autoscaler(sname, dict(spec), ScalerContext()))
        scalers.append((name, Component.of(sname, spec)))
    return FleetSetup(Component.of(raw.router_name, params), None if cap is None else int(cap),
                      _placement(raw, where), overload, tuple(scalers),
                      rolling_plan(raw.rolling_update, list(raw.pools), where) if raw.rolling_update else None)
