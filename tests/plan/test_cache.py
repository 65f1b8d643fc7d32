"""Results are cached by a hash of the resolved config: a repeated plan simulates nothing, a widened one only the
new configurations, and `cache=false` simulates again."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

import sim.plan.executors as executors
from sim.compose import compose_config
from sim.plan import parse_args, plan
from sim.plan.cache import config_hash

from tests.plan.toy import SEARCH, TOY


def _plan(root, *extra, out="plan"):
    args = [*TOY, *extra, f"out_dir={root / out}", f"cache_dir={root / 'cache'}", "jobs=1", "progress=false"]
    return plan(parse_args(args), "test")[0]


def _forbid_simulation(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("simulated although the result is cached")
    monkeypatch.setattr(executors, "simulate_job", refuse)


def test_a_repeated_plan_simulates_nothing(tmp_path, monkeypatch):
    first = _plan(tmp_path, *SEARCH, out="first")
    assert first["jobs"]["simulated"] == first["jobs"]["configurations"] > 0
    _forbid_simulation(monkeypatch)
    again = _plan(tmp_path, *SEARCH, out="again")
    assert again["jobs"]["simulated"] == 0
    assert again["jobs"]["cached"] == again["jobs"]["configurations"] == first["jobs"]["configurations"]
    assert again["chosen"]["overrides"] == first["chosen"]["overrides"]
    assert again["chosen"]["config_hash"] == first["chosen"]["config_hash"]
    assert all(c["cached"] for c in again["configurations"])


def test_a_narrower_plan_reuses_a_wider_ones_results(tmp_path, monkeypatch):
    _plan(tmp_path, "search.scenario.pools.main.instances=[2,3,4]", "batching.max_num_seqs=2", out="wide")
    _forbid_simulation(monkeypatch)
    # Same configurations spelled differently (a list of one, the other order): the same resolved configs.
    narrow = _plan(tmp_path, "search.scenario.pools.main.instances=[3,4]", "search.batching.max_num_seqs=[2]",
                   out="narrow")
    assert narrow["jobs"]["simulated"] == 0 and narrow["chosen"]["overrides"]["scenario.pools.main.instances"] == 3


def test_cache_false_simulates_again(tmp_path):
    one = "search.scenario.pools.main.instances=[5]"            # a search of one configuration
    _plan(tmp_path, one, out="one")
    again = _plan(tmp_path, one, "cache=false", out="two")
    assert again["jobs"]["simulated"] == 1 and again["jobs"]["cached"] == 0


@pytest.mark.parametrize("change, same", [("metrics.progress=true", True), ("seed=1", False),
                                          ("scenario.pools.main.instances=3", False)])
def test_the_hash_ignores_only_what_cannot_change_results(change, same):
    def key(*overrides):
        return config_hash(OmegaConf.to_container(compose_config(["scenario=smoke", *overrides]), resolve=True))
    assert (key(change) == key()) is same


def test_the_hash_follows_the_contents_of_named_files(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("a\n1\n")
    config = {"scenario": {"traffic": {"kind": "trace", "path": str(trace)}, "description": "x" * 5000}}
    before = config_hash(config)
    assert config_hash(config) == before
    trace.write_text("a\n2\n")
    assert config_hash(config) != before


def test_a_run_that_completed_as_the_signal_came_is_kept_in_the_plan_and_the_cache(tmp_path, monkeypatch):
    """The signal lands after a simulation wrote its folder (DONE) but before its result reached the planner:
    the finished run is committed to the cache and listed in the partial plan, not thrown away."""
    import json

    from sim.plan.planner import PlanInterrupted

    real = executors.simulate_job

    def finish_then_signal(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt
    monkeypatch.setattr(executors, "simulate_job", finish_then_signal)
    with pytest.raises(PlanInterrupted) as stop:
        _plan(tmp_path, *SEARCH)
    assert stop.value.configurations == 1
    doc = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert doc["status"] == "interrupted" and len(doc["configurations"]) == 1
    assert len(list((tmp_path / "cache").rglob("DONE"))) == 1 and not list((tmp_path / "cache").rglob(".tmp-*"))
    monkeypatch.setattr(executors, "simulate_job", real)
    again = _plan(tmp_path, *SEARCH, out="again")      # the resumed plan reuses it
    assert again["jobs"]["cached"] == 1
