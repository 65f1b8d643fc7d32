"""The configuration's one home: records typed from their annotations, one YAML reader refusing bad files in one
line, one resolved record of each pool's scheduler settings with the source of each, and the programs reading it
(the deployment validation reports where max_num_seqs really comes from)."""
from __future__ import annotations

import dataclasses

import pytest

import sim.config
from inferplan.config.build import build
from inferplan.config.run import PoolConfig, RunConfig
from inferplan.config.yaml_files import read_yaml, read_yaml_mapping
from inferplan.errors import InputError
from sim.validate.deployment import _fill_sources
from tests.sim.helpers import run_config

SYNTH = ["cost=constant", "cost.step_time_s=0.01", "cost.per_token_s=0"]
POOL = "scenario.pools.main"


def test_field_types_come_from_the_annotations():
    """`build` coerces by the record's own type hints (no source parsing): an optional int takes 2.0, refuses 2.5."""
    assert not hasattr(sim.config, "_written_types")
    p = build(PoolConfig, {"hardware": "h100_sxm", "model": "llama3_8b", "max_instances": 2.0, "tp": "2"}, "w")
    assert p.max_instances == 2 and isinstance(p.max_instances, int) and p.tp == 2
    with pytest.raises(InputError, match=r"^w: max_instances: has the wrong type: 2.5 \(fix: give a int\)$"):
        build(PoolConfig, {"hardware": "h100_sxm", "model": "llama3_8b", "max_instances": 2.5}, "w")
    with pytest.raises(InputError, match=r"^w: has_deployment: unknown key"):  # (set by the loader, not the yaml)
        build(PoolConfig, {"hardware": "h", "model": "m", "has_deployment": True}, "w", hidden=("has_deployment",))


def test_the_yaml_reader_names_the_file_it_refuses(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(InputError, match=rf"^{bad}: file: cannot parse \(ParserError\) \(fix: fix the syntax\)$"):
        read_yaml(bad)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n")
    with pytest.raises(InputError, match=rf"^{listed}: file: is not a mapping"):
        read_yaml_mapping(listed)
    (tmp_path / "empty.yaml").write_text("")
    assert read_yaml_mapping(tmp_path / "empty.yaml") == {}
    with pytest.raises(InputError, match="cannot be read"):
        read_yaml(tmp_path / "missing.yaml")


def test_the_run_holds_records_not_group_dicts():
    run = run_config(*SYNTH)
    plain = [f.name for f in dataclasses.fields(RunConfig) if isinstance(getattr(run, f.name), (dict, list))
             and not all(dataclasses.is_dataclass(v) for v in getattr(run, f.name).values())]
    assert plain == []
    assert run.batching.name == run.batching_name == "continuous" and run.fleet.autoscaler("main").name == "fixed"


def test_scheduler_settings_record_their_source_and_override():
    group = run_config(*SYNTH).setups["main"].scheduler
    assert group.setting("max_num_seqs").source == "conf/batching/continuous.yaml"
    assert group.setting("max_num_seqs").override == "batching.max_num_seqs"
    pool = run_config(*SYNTH, f"++{POOL}.batching={{max_num_seqs: 7}}").setups["main"].scheduler
    assert (pool.value("max_num_seqs"), pool.setting("max_num_seqs").override) == (7, f"{POOL}.batching.max_num_seqs")
    assert pool.pool_batching.param("max_num_seqs") == 7
    engine = run_config(*SYNTH, "engine=vllm_v1").setups["main"].scheduler
    seqs = engine.setting("max_num_seqs")
    assert (seqs.value, seqs.source, seqs.override) == (1024, "conf/engine/vllm_v1.yaml", "engine.max_num_seqs")
    own = run_config(*SYNTH, f"++{POOL}.engine={{name: vllm_v1, max_num_seqs: 64}}").setups["main"].scheduler
    seqs = own.setting("max_num_seqs")
    assert own.own_engine and (seqs.value, seqs.source, seqs.override) == (64, f"scenario/smoke: pools.main.engine", "")


def test_the_deployment_validation_reports_the_engine_presets_max_num_seqs():
    """With an engine preset, the batching group's max_num_seqs (what a log offers) does not reach the scheduler:
    the report gives the preset's value and says so, not the log's value as if it ran."""
    log = {"max_num_seqs": {"value": 64, "source": "log"}}
    run = run_config(*SYNTH, "engine=vllm_v1", "++batching.max_num_seqs=64")
    sources = {k: dict(v) for k, v in log.items()}
    _fill_sources(run, "main", "smoke", sources, set(), POOL)
    assert sources["max_num_seqs"] == {"value": 1024, "source": "engine preset vllm_v1 (conf/engine/vllm_v1.yaml)"}
    generic = run_config(*SYNTH, "++batching.max_num_seqs=64")
    sources = {k: dict(v) for k, v in log.items()}
    _fill_sources(generic, "main", "smoke", sources, set(), POOL)
    assert sources["max_num_seqs"] == {"value": 64, "source": "log"}


def test_a_bad_efficiency_scale_is_refused_at_load():
    with pytest.raises(InputError, match=r"^conf/cost: efficiency_scale: efficiency_scale.gemm must be > 0, got 0"):
        run_config("++cost.efficiency_scale.gemm=0")
