"""Configurations the simulator refuses are reported, not fatal; with no `search.` argument the planner sizes every
fixed-size pool."""
from __future__ import annotations

import pyarrow.parquet as pq

from sim.plan import parse_args, plan

from tests.plan.toy import TOY


def _plan(tmp_path, *args):
    return plan(parse_args([*args, f"out_dir={tmp_path / 'plan'}", f"cache_dir={tmp_path / 'cache'}", "jobs=1",
                            "progress=false"]), "test")


def test_a_refused_configuration_is_invalid_and_its_line_pruned(tmp_path):
    doc, path = _plan(tmp_path, *TOY, "batching.max_num_seqs=2", "search.scenario.pools.main.instances=[2,3,4]",
                      "search.scenario.pools.main.model=[llama3_8b,deepseek_v3]")
    invalid = [c for c in doc["configurations"] if c["status"] == "invalid"]
    # deepseek_v3 (671B parameters) cannot fit one H100: one simulation at the largest count, then pruned.
    assert len(invalid) == 1 and invalid[0]["overrides"]["scenario.pools.main.model"] == "deepseek_v3"
    assert "does not fit 1 x h100_sxm" in invalid[0]["error"] and invalid[0]["objective"] is None
    assert doc["jobs"]["invalid"] == 1
    assert doc["chosen"]["overrides"] == {"scenario.pools.main.model": "llama3_8b", "scenario.pools.main.instances": 3}
    rows = pq.read_table(path.parent / "sweep.parquet").to_pandas().set_index("job")
    assert rows.loc[invalid[0]["id"], "status"] == "invalid" and rows.loc[invalid[0]["id"], "run_dir"] == ""
    assert "does not fit" in rows.loc[invalid[0]["id"], "error"]


def test_without_a_search_every_fixed_pool_is_sized(tmp_path):
    doc, _ = _plan(tmp_path, "scenario=smoke", "scenario.traffic.num_requests=100")
    assert [(d["key"], d["values"], d["bisected"]) for d in doc["search"]] == [
        ("scenario.pools.main.instances", [1, 2, 3, 4], True)]          # smoke has 2 instances: 1 .. 4
    assert doc["notes"][0].startswith("no search.* argument")
    assert doc["chosen"]["overrides"] == {"scenario.pools.main.instances": 1}


def test_ecommerce_peak_default_plan_searches_the_l40s_floor_over_the_whole_flash_sale():
    """The documented default (docs/planning.md): the knob the run's diagnosis names, on 19:55-20:35."""
    from sim.compose import compose_config
    from sim.config import load_run_config
    from sim.plan.planner import default_overrides, default_space, validate

    base = ["scenario=ecommerce_peak", *default_overrides("ecommerce_peak")]
    space = default_space(load_run_config(compose_config(base)))
    assert [(d.key, d.values) for d in space.dimensions] == [
        ("scenario.pools.l40s_int4.min_instances", (4, 8, 12, 16, 20, 24, 28, 32))]
    run = validate(base, space)
    assert run.scenario.traffic["transforms"] == [{"kind": "window", "start_s": 1500, "end_s": 3900}]
    flash = run.scenario.traffic["parts"][0]["flash_sales"][0]   # the sale: 1800 + ramp + hold + decay = 3780 s
    assert 1500 < flash["start_s"] and flash["start_s"] + flash["ramp_s"] + flash["hold_s"] + flash["decay_s"] <= 3900
