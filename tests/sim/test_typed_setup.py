"""Below the configuration layer everything is typed: the setups `load_run_config` hands the core hold no plain
dict or list (engine presets, pool settings, placement routes, the scheduled plan are frozen records), and each
bad block is refused at load in one line naming the file, the field and the fix."""
from __future__ import annotations

import dataclasses

import pytest

from inferplan.config.component import Component
from inferplan.errors import InputError
from inferplan.config.fleet import ClassSlo, PlanStep, Route
from inferplan.config.engine import EnginePreset
from tests.sim.helpers import run_config

SYNTH = ["cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0"]
# Records whose str -> number tables are typed mappings by design (a device's peak FLOP/s per compute format, a
# deployment's weight format per weight group), and types owned by other parts (cost, calibration).
FOREIGN = ("inferplan.config.specs", "inferplan.config.deployment", "sim.core.cost", "calibrate")


def plain_blocks(obj, path: str = "setup") -> list[str]:
    """Paths of every plain dict, list or set inside `obj`, through dataclass fields, tuples and Component params."""
    if isinstance(obj, (dict, list, set)):
        return [path]
    if isinstance(obj, tuple):
        return [p for i, v in enumerate(obj) for p in plain_blocks(v, f"{path}[{i}]")]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if type(obj).__module__.startswith(FOREIGN):
            return []
        return [p for f in dataclasses.fields(obj) for p in plain_blocks(getattr(obj, f.name), f"{path}.{f.name}")]
    return []


def core_setups(run) -> list[tuple[str, object]]:
    return [*((f"setups.{n}", s) for n, s in run.setups.items()), ("fleet", run.fleet)]


def test_the_walker_finds_a_plain_block():
    """(The check below could fail: a dict anywhere in a record is found.)"""
    @dataclasses.dataclass(frozen=True)
    class Leaky:
        fine: tuple = (1, 2)
        inner: object = None

    assert plain_blocks(Leaky(inner=Leaky(fine=({"a": 1},)))) == ["setup.inner.fine[0]"]
    assert plain_blocks(Component("x", (("plan", [1]),))) == ["setup.params[0][1]"]
    assert plain_blocks(EnginePreset()) == []


@pytest.mark.parametrize("overrides", [
    [],
    ["engine=vllm_v0"],
    ["engine=sglang", "++scenario.pools.main.engine={name: trtllm, max_num_seqs: 64}"],
    ["autoscaler=scheduled"],
    ["autoscaler=reactive", "+scenario.overload={enabled: true, watch_pools: [main]}"],
    ["+scenario.placement={name: cost_aware, default: [main], routes: {chat: [main]}, "
     "class_slo: {chat: {ttft_p99_s: 1.0}}}"],
])
def test_no_plain_dict_or_list_reaches_the_core(overrides):
    run = run_config(*SYNTH, *overrides)
    found = [p for where, setup in core_setups(run) for p in plain_blocks(setup, where)]
    assert found == []


def test_blocks_are_parsed_into_frozen_records():
    run = run_config(*SYNTH, "autoscaler=scheduled", "+scenario.placement={name: cost_aware, routes: "
                     "{chat: [main]}, class_slo: {chat: {tpot_p99_s: 0.05}}}")
    assert run.fleet.autoscaler("main").param("plan") == (PlanStep(0.0, 1), PlanStep(28800.0, 2),
                                                           PlanStep(79200.0, 1))
    placement = run.fleet.placement
    assert placement.param("routes") == (Route("chat", ("main",)),) and placement.param("default") == ("main",)
    assert placement.param("class_slo") == (ClassSlo("chat", None, 0.05),)
    sglang = run_config(*SYNTH, "engine=sglang").setups["main"]
    assert sglang.engine.cuda_graph_sizes[:4] == (1, 2, 4, 8) and sglang.engine.max_num_seqs is None
    assert sglang.engine.gpu_memory_utilization_by_tp[0] == (1, 0.88) and sglang.pool.block_size_tokens == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        sglang.engine.max_num_seqs = 3  # type: ignore[misc]


def test_a_component_refuses_a_plain_block():
    with pytest.raises(TypeError, match="plan"):
        Component.of("scheduled", {"plan": [{"at_s": 0, "instances": 1}]})


SCEN = "scenario/smoke"
POOL = "scenario/smoke: pools.main"


@pytest.mark.parametrize("overrides, start", [
    (["engine=vllm_v1", "engine.max_num_seqs=lots"], f"{POOL}: engine: max_num_seqs: has the wrong type"),
    (["engine=vllm_v1", "engine.chunked_prefill=7"], f"{POOL}: engine: chunked_prefill: has the wrong type"),
    (["engine=sglang", "engine.cuda_graph_sizes={small: [x]}"], f"{POOL}: engine.cuda_graph_sizes: "),
    (["engine=vllm_v1", "+engine.gpu_memory_utilization_by_tp={one: 0.9}"],
     f"{POOL}: engine.gpu_memory_utilization_by_tp: "),
    (["engine=vllm_v1", "engine.watermark_fraction=2"], "conf/engine/vllm_v1.yaml: parameters: \"watermark_fraction\""),
    (["+scenario.placement={routes: [main]}"], f"{SCEN}: placement.routes: must map request classes"),
    (["+scenario.placement={routes: {chat: main}}"], f"{SCEN}: placement.routes"),
    (["+scenario.placement={name: cost_aware, class_slo: {chat: {ttft_p99: 1}}}"],
     f"{SCEN}: placement.class_slo.chat.ttft_p99: unknown key (fix: valid keys: ttft_p99_s, tpot_p99_s)"),
    (["+scenario.placement={name: cost_aware, class_slo: {chat: 1.0}}"], f"{SCEN}: placement.class_slo.chat: "),
    (["+scenario.placement={name: spill_over, limits: [1, 2]}"], f"{SCEN}: placement.limits: must be a single value"),
    (["autoscaler=scheduled", "autoscaler.plan=[{at_s: 0, count: 1}]"],
     "conf/autoscaler/scheduled.yaml: autoscaler.plan[0].count: unknown key (fix: valid keys: at_s, instances)"),
    (["autoscaler=scheduled", "autoscaler.plan=[{instances: 1}]"],
     "conf/autoscaler/scheduled.yaml: autoscaler.plan[0].at_s: is missing"),
    (["autoscaler=scheduled", "autoscaler.plan=[{at_s: 99999999, instances: 1}]"],
     f"{POOL}: autoscaler: scheduled: each step needs 0 <= at_s < period_s"),
    (["+scenario.pools.main.autoscaler={name: scheduled, plan: {at_s: 0}}"], f"{POOL}: autoscaler.plan: must be a list"),
    (["autoscaler=reactive", "+autoscaler.step=[1, 2]"], "conf/autoscaler/reactive.yaml: autoscaler.step: must be a single"),
    (["+batching.token_budget=[1, 2]"], "conf/batching/continuous.yaml: batching.token_budget: must be a single value"),
    (["+scenario.overload={watch_pools: main}"], f"{SCEN}: overload.watch_pools: must be a list of pool names"),
])
def test_each_bad_block_is_one_line_naming_file_field_and_fix(overrides, start):
    with pytest.raises(InputError) as err:
        run_config(*SYNTH, *overrides)
    message = str(err.value)
    assert message.startswith(start), message
    assert "\n" not in message and "(fix: " in message and message.endswith(")")
