"""Confidence: error bands from the validation matrix, their lookup with fallback, and the plan that pays for them
(a fleet that meets at the point estimate but not at confidence 0.9 loses to the larger one, and the difference is
priced); the seeds' spread."""
from __future__ import annotations

import pytest

from inferplan.errors import InputError
from sim.plan import confidence, parse_args, plan
from sim.plan.confidence import Bands, lookup, parse_confidence, pool_partition
from sim.plan.slo import SloCheck, slo_checks
from sim.validate.silicon.bands import MIN_ROWS, distill, engine_of_preset, hardware_class, model_family


def _q(x: float) -> dict:
    return {"rows": 9, "quantiles": {"0.5": 1.0, "0.8": x, "0.9": x, "0.95": x}}


PARTITIONS = {
    "vllm/hopper/dense": {"ttft": _q(1.3), "tpot": _q(0.8)},
    "vllm/hopper/*": {"ttft": _q(1.4), "tpot": _q(1.1)},
    "sglang/*/*": {"ttft": _q(2.0)},
    "*/hopper/dense": {"tpot": _q(1.2)},
    "*/ampere/*": {"ttft": _q(1.7)},
    "*/*/*": {"ttft": _q(1.5), "tpot": _q(1.6)},
}


def test_partition_keys_come_from_the_conf_files():
    assert hardware_class("h100_sxm") == "hopper" and hardware_class("h200_sxm") == "hopper"
    assert hardware_class("a100_80gb") == "ampere"
    assert model_family("qwen3_32b") == "dense" and model_family("minimax_m2_5") == "moe"
    assert [engine_of_preset(p) for p in ("vllm_v1_serve", "sglang_v04", "trtllm", "generic")] == \
        ["vllm", "sglang", "trtllm", "generic"]


@pytest.mark.parametrize("where, metric, partition, level, factor", [
    (("vllm", "hopper", "dense"), "ttft", "vllm/hopper/dense", "exact", 1.3),
    (("vllm", "hopper", "moe"), "ttft", "vllm/hopper/*", "engine+hardware class", 1.4),
    (("sglang", "blackwell", "moe"), "ttft", "sglang/*/*", "engine", 2.0),
    (("generic", "hopper", "dense"), "tpot", "*/hopper/dense", "hardware class+family", 1.2),
    (("generic", "ampere", "moe"), "ttft", "*/ampere/*", "hardware class", 1.7),
    (("sglang", "hopper", "dense"), "tpot", "*/hopper/dense", "hardware class+family", 1.2),
    (("generic", "ada", "dense"), "tpot", "*/*/*", "all", 1.6),
])
def test_lookup_takes_the_nearest_partition_in_the_stated_order(where, metric, partition, level, factor):
    band = lookup(PARTITIONS, *where, metric, 0.9)
    assert (band.partition, band.level, band.factor) == (partition, level, factor)


def test_a_factor_below_one_is_applied_as_one_and_kept_raw():
    band = lookup(PARTITIONS, "vllm", "hopper", "dense", "tpot", 0.9)
    assert band.factor_raw == 0.8 and band.factor == 1.0


def test_a_band_never_turns_a_miss_into_a_pass():
    miss = SloCheck("tpot_p99", "default", 0.05, 0.06, "s", False, {"factor": 1.0})
    assert not miss.met_at_confidence
    near = SloCheck("tpot_p99", "default", 0.05, 0.04, "s", True, {"factor": 1.3})
    assert near.achieved_at_confidence == pytest.approx(0.052) and not near.met_at_confidence
    assert SloCheck("tpot_p99", "default", 0.05, 0.04, "s", True, {"factor": 1.2}).met_at_confidence


def test_a_class_served_by_several_pools_takes_the_largest_factor():
    config = {"engine": {"name": "vllm_v1"}, "scenario": {
        "pools": {"a": {"hardware": "h100_sxm", "model": "qwen3_32b"},
                  "b": {"hardware": "l40s", "model": "qwen2_5_7b", "engine": "sglang_v04"}},
        "placement": {"routes": {"qa": ["a", "b"], "chat": ["a"]}}}}
    assert pool_partition(config, "b") == ("sglang", "ada", "dense")
    bands = Bands(0.9, PARTITIONS)
    assert bands.for_check(config, "qa", "ttft_p99").pool == "b"          # sglang/*/*: 2.0 > 1.3
    assert bands.for_check(config, "chat", "ttft_p99").partition == "vllm/hopper/dense"
    assert bands.for_check(config, "qa", "served_fraction") is None
    summary = {"slo": {"served_fraction": 0.99, "served": 1.0, "met": {"served_fraction": True}, "classes": {
        "chat": {"ttft_p99_s_target": 1.0, "tpot_p99_s_target": 0.1, "ttft_s": {"p99": 0.5},
                 "tpot_s": {"p99": 0.05}, "served": 1.0,
                 "met": {"ttft_p99": True, "tpot_p99": True, "served_fraction": True}}}}}
    by = {c.name: c for c in slo_checks(summary, config, bands) if c.request_class == "chat"}
    assert by["ttft_p99"].band["partition"] == "vllm/hopper/dense"
    assert by["ttft_p99"].to_json()["achieved_at_confidence"] == pytest.approx(0.65)
    assert by["served_fraction"].band is None


def test_distill_quantiles_of_measured_over_simulated():
    rows = [{"status": "simulated", "engine": "vllm", "system": "h100_sxm", "model": "Qwen3-32B",
             "measured_ttft_s": str(r), "sim_ttft_p50_s": "1.0", "measured_tpot_s": "0.01", "sim_tpot_p50_s": "0.01"}
            for r in (1.0, 1.1, 1.2, 1.3, 1.4, 1.5)]
    rows.append({**rows[0], "status": "failed"})
    parts = distill(rows)
    exact = parts["vllm/hopper/dense"]
    assert exact["ttft"]["rows"] == 6 and exact["ttft"]["quantiles"]["0.5"] == pytest.approx(1.25)
    assert exact["tpot"]["quantiles"]["0.9"] == pytest.approx(1.0)
    assert set(parts) == {"vllm/hopper/dense", "vllm/hopper/*", "vllm/*/*", "*/hopper/dense", "*/hopper/*", "*/*/*"}
    assert distill(rows[:MIN_ROWS - 1]) == {}


def test_the_shipped_band_file_states_its_statistic_and_has_every_level():
    doc = confidence.load_bands()
    assert "median" in doc["statistic"] and doc["quantiles"] == ["0.5", "0.8", "0.9", "0.95"]
    assert "*/*/*" in doc["partitions"] and "python -m sim.validate.silicon.bands" in doc["command"]
    assert parse_confidence("none") is None and parse_confidence(0) is None and parse_confidence("0.9") == 0.9
    with pytest.raises(InputError, match="confidence.*unknown level"):
        parse_confidence("0.7")


# A smoke plan whose TPOT target the one-instance fleet meets at the point estimate (about 17 ms against 25 ms)
# but not after a x1.6 band (about 27 ms); two instances (about 13 ms -> 21 ms) meet at both.
TIGHT = ("scenario=smoke", "scenario.traffic.num_requests=600", "scenario.slo.tpot_p99_s=0.020",
         "search.scenario.pools.main.instances=range(1,4)", "jobs=1", "progress=false")
BANDS = {"quantiles": ["0.5", "0.8", "0.9", "0.95"],
         "partitions": {"*/*/*": {"ttft": _q(1.0), "tpot": {"rows": 9, "quantiles": {
             "0.5": 1.0, "0.8": 1.2, "0.9": 1.6, "0.95": 2.0}}}}}


@pytest.fixture()
def fake_bands(monkeypatch):
    monkeypatch.setattr(confidence, "load_bands", lambda path=None: BANDS)


def test_confidence_picks_the_larger_fleet_and_prices_the_difference(fake_bands, tmp_path):
    args = [*TIGHT, f"out_dir={tmp_path / 'p'}", f"cache_dir={tmp_path / 'c'}", "seeds=2"]
    doc, _ = plan(parse_args(args), "test")
    assert doc["confidence"]["level"] == 0.9
    assert doc["point_estimate_choice"]["overrides"] == {"scenario.pools.main.instances": 1}
    assert doc["chosen"]["overrides"] == {"scenario.pools.main.instances": 2}
    assert doc["chosen"]["meets_at_confidence"] and not doc["point_estimate_choice"]["meets_at_confidence"]
    tpot = next(c for c in doc["point_estimate_choice"]["slos"] if c["name"] == "tpot_p99")
    assert tpot["met"] and not tpot["met_at_confidence"] and tpot["band"]["partition"] == "*/*/*"
    # One more H100 at $2.99/h: in the windows' bills per hour, and all month from the (flat) curve.
    assert doc["confidence_cost_usd_per_hour"] == pytest.approx(2.99, rel=0.05)
    assert doc["confidence_cost_usd_per_month"] == pytest.approx(2.99 * 730, rel=1e-6)
    seeds = doc["chosen"]["seeds"]
    assert seeds["seeds"] == [0, 1] and [r["seed"] for r in seeds["runs"]] == [0, 1] and seeds["all_meet"]
    spread = seeds["spread"]["default tpot_p99"]
    assert spread["min"] <= spread["median"] <= spread["max"] < 0.020 and spread["seeds"] == 2
    assert seeds["runs"][1]["config_hash"] != seeds["runs"][0]["config_hash"]
    assert doc["point_estimate_choice"]["seeds"]["all_meet_at_point_estimate"]

    point, _ = plan(parse_args([*args, "confidence=0", "seeds=1", f"out_dir={tmp_path / 'q'}"]), "test")
    assert point["confidence"] is None and point["chosen"]["overrides"] == {"scenario.pools.main.instances": 1}
    assert point["chosen"]["seeds"] is None and point["confidence_cost_usd_per_hour"] == 0.0
    assert point["jobs"]["simulated"] == 0   # every run came from the first plan's cache
