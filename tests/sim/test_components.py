"""Configuration below the config layer is typed (`inferplan.config.component.Component`, `ColdStart`) and checked at
load: a bad batching parameter, cold-start key, router or autoscaler parameter is refused by `load_run_config`,
in one message form, before any pool is built."""
from __future__ import annotations

import pytest

from inferplan.config.component import Component
from inferplan.errors import InputError
from inferplan.config.fleet import ColdStart
from sim.core.instance.engine import EnginePreset
from tests.sim.helpers import run_config

SYNTH = ["cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0"]


def test_a_component_is_frozen_and_hands_out_fresh_kwargs():
    c = Component.of("continuous", {"name": "continuous", "token_budget": 4096, "max_num_seqs": 8})
    assert c == Component("continuous", (("token_budget", 4096), ("max_num_seqs", 8)))
    kw = c.kwargs()
    kw["token_budget"] = 1
    assert c.param("token_budget") == 4096 and c.param("absent", 7) == 7
    assert c.with_params({"max_num_seqs": 2}).params == (("token_budget", 4096), ("max_num_seqs", 2))
    with pytest.raises(AttributeError):
        c.name = "static"  # type: ignore[misc]


def test_the_resolved_setup_holds_typed_components():
    run = run_config(*SYNTH, "batching=continuous", "batching.max_num_seqs=12", "router=least_outstanding",
                     "+scenario.pools.main.cold_start.warmup_s=7.5")
    setup, fleet = run.setups["main"], run.fleet
    assert setup.batching.name == "continuous" and setup.batching.param("max_num_seqs") == 12
    assert setup.engine == EnginePreset() and setup.engine.generic
    assert setup.cold_start == ColdStart(warmup_s=7.5)
    assert fleet.router.name == "least_outstanding" and fleet.placement.name == "static"
    assert fleet.autoscaler("main").name == run.autoscaler_name and fleet.rolling_update is None
    planned = run_config(*SYNTH, "+scenario.rolling_update={at_s: 5, wave_size: 2}").fleet.rolling_update
    assert (planned.at_s, planned.wave_size, planned.pools) == (5.0, 2, ("main",))


@pytest.mark.parametrize("override, where, field", [
    ("+batching.max_num_seqz=4", "conf/batching/continuous.yaml", "parameters"),
    ("batching.max_num_seqs=0", "conf/batching/continuous.yaml", "parameters"),
    ("+scenario.pools.main.cold_start.warmup=1", "scenario/smoke: pools.main", "cold_start"),
    ("+router.nonsense=1", "conf/router/least_outstanding.yaml", "parameters"),
    ("+scenario.rolling_update={at_s: 5, waves: 2}", "scenario/smoke", "rolling_update.waves"),
])
def test_bad_parameters_are_refused_at_load_in_one_form(override, where, field):
    with pytest.raises(InputError) as err:
        run_config(*SYNTH, "batching=continuous", "router=least_outstanding", override)
    assert str(err.value).startswith(f"{where}: {field}")


def test_nothing_reads_a_file_during_a_run(monkeypatch):
    """Everything file-backed is resolved at load: building the cluster and running it open no file."""
    import builtins
    import pathlib

    import yaml

    from sim.simulate import simulate
    from tests.sim.helpers import poisson_workload

    run = run_config("engine=vllm_v1", "scenario.pools.main.instances=2",
                     "+scenario.pools.main.deployment={pp: 1}", "+scenario.rolling_update={at_s: 1}")
    workload = poisson_workload(60, 20.0, seed=6)

    def refuse(*args, **kwargs):
        raise AssertionError(f"a file was read during the run: {args[:1]!r}")

    monkeypatch.setattr(yaml, "safe_load", refuse)
    monkeypatch.setattr(pathlib.Path, "read_text", refuse)
    monkeypatch.setattr(pathlib.Path, "open", refuse)
    monkeypatch.setattr(builtins, "open", refuse)
    res = simulate(run, workload)
    assert (res.requests["status"] == "completed").all()
