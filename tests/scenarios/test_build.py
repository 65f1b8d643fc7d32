"""`build_workload`: every kind from a plain dict, determinism by named streams, and one-line config errors."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from inferplan.errors import InputError
from scenarios import GENERATORS, build_workload
from scenarios.paths import REPO_ROOT, shared_root

LOGNORMAL = {"kind": "lognormal", "prompt": {"median_tokens": 800, "p99_tokens": 6000},
             "output": {"mean_tokens": 150, "sigma": 0.7}}
FIXED = {"kind": "fixed", "prompt_tokens": 100, "output_tokens": 10}

KINDS = {
    "poisson": {"kind": "poisson", "rate_per_s": 5.0, "duration_s": 600, "lengths": LOGNORMAL},
    "gamma": {"kind": "gamma", "rate_per_s": 5.0, "cv": 2.5, "duration_s": 600, "lengths": LOGNORMAL},
    "mmpp": {"kind": "mmpp", "rates_per_s": [1.0, 20.0], "mean_dwell_s": [60, 10], "duration_s": 600,
             "lengths": LOGNORMAL},
    "daily": {"kind": "daily", "duration_s": 7200, "curve_start_s": 68_400,
              "curve": {"kind": "piecewise_linear", "rates_per_s": [1] * 12 + [4] * 12},
              "mean_rate_per_s": 3.0,
              "flash_sales": [{"start_s": 1800, "ramp_s": 120, "hold_s": 300, "decay_s": 600, "peak_multiplier": 6}],
              "lengths": LOGNORMAL},
    "flash_sale": {"kind": "flash_sale", "rate_per_s": 2.0, "start_s": 100, "ramp_s": 60, "hold_s": 60,
                   "decay_s": 100, "peak_multiplier": 10, "duration_s": 600, "lengths": FIXED},
    "client_windows": {"kind": "client_windows", "clients": [
        {"rate_per_s": [1.0, 3.0], "cv": 2.0, "pattern": "gamma"},
        {"rate_per_s": [0.5, 0.0], "cv": [1.5, 1.5], "pattern": "weibull"}], "lengths": FIXED},
    "sessions": {"kind": "sessions", "session_arrivals": {"kind": "poisson", "rate_per_s": 0.2, "duration_s": 1800},
                 "turns": {"kind": "geometric", "mean": 4}, "think_time_s": {"kind": "exponential", "mean_s": 20},
                 "user_tokens": {"kind": "lognormal", "median_tokens": 60, "p99_tokens": 600},
                 "output_tokens": {"kind": "lognormal", "median_tokens": 200, "p99_tokens": 900},
                 "shared_prefix_tokens": 1500, "shared_prefix_name": "cs", "max_context_tokens": 16000,
                 "tpot_estimate_s": 0.03},
    "servegen": {"kind": "servegen", "path": "scenarios/samples/servegen_deepseek_r1", "rate_scale": 5.0},
    "trace": {"kind": "trace", "format": "azure", "path": "scenarios/samples/azure_code_head200.csv"},
    "closed_loop": {"kind": "closed_loop", "clients": 4, "requests": 50, "think_time_s": 1.0, "lengths": LOGNORMAL},
    "mix": {"kind": "mix", "parts": [
        {"kind": "poisson", "rate_per_s": 3.0, "duration_s": 600, "lengths": LOGNORMAL, "request_class": "qa",
         "priority": 2},
        {"kind": "gamma", "rate_per_s": 1.0, "cv": 3.0, "duration_s": 600, "lengths": FIXED,
         "request_class": "batch"}]},
}


def test_every_registered_kind_is_covered():
    assert set(KINDS) == set(GENERATORS)


@pytest.mark.parametrize("kind", list(KINDS))
def test_kind_builds_and_is_deterministic(kind):
    a, b = build_workload(KINDS[kind], seed=7), build_workload(copy.deepcopy(KINDS[kind]), seed=7)
    assert len(a) > 0
    a.validate()
    for col in ("arrival_s", "prompt_tokens", "output_tokens", "request_class", "priority", "session_id"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    assert (a.prefix_hashes is None) == (b.prefix_hashes is None)
    if a.prefix_hashes is not None:
        assert all(np.array_equal(x, y) for x, y in zip(a.prefix_hashes, b.prefix_hashes))
    if kind == "closed_loop":   # arrivals are made by the simulation; the seed draws the lengths
        assert not np.array_equal(build_workload(KINDS[kind], seed=8).prompt_tokens, a.prompt_tokens)
    elif kind != "trace":
        assert not np.array_equal(build_workload(KINDS[kind], seed=8).arrival_s[:5], a.arrival_s[:5])


def test_changing_lengths_keeps_arrivals():
    cfg = dict(KINDS["daily"])
    other = {**cfg, "lengths": FIXED}
    a, b = build_workload(cfg, 1), build_workload(other, 1)
    assert np.array_equal(a.arrival_s, b.arrival_s) and not np.array_equal(a.prompt_tokens, b.prompt_tokens)


def test_mix_parts_are_independent_and_classed():
    mix = build_workload(KINDS["mix"], 3)
    assert mix.class_names == ("qa", "batch")
    assert set(mix.priority[mix.request_class == 0].tolist()) == {2}
    assert set(mix.priority[mix.request_class == 1].tolist()) == {0}
    edited = copy.deepcopy(KINDS["mix"])
    edited["parts"][1]["rate_per_s"] = 9.0  # change only the batch part
    edited["parts"].append({"kind": "poisson", "rate_per_s": 1.0, "duration_s": 600, "lengths": FIXED,
                            "request_class": "copy"})
    mix2 = build_workload(edited, 3)
    qa1, qa2 = mix.request_class == 0, mix2.request_class == 0
    assert np.array_equal(mix.arrival_s[qa1], mix2.arrival_s[qa2])
    assert np.array_equal(mix.prompt_tokens[qa1], mix2.prompt_tokens[qa2])


def test_mix_rate_is_the_sum_of_parts():
    mix = build_workload({"kind": "mix", "parts": [
        {"kind": "poisson", "rate_per_s": 30.0, "duration_s": 2000, "lengths": FIXED, "request_class": "a"},
        {"kind": "poisson", "rate_per_s": 10.0, "duration_s": 2000, "lengths": FIXED, "request_class": "b"}]}, 0)
    assert len(mix) / 2000 == pytest.approx(40.0, rel=0.03)  # 80,000 arrivals: SE 0.35%


def test_daily_mean_rate_normalisation_and_flash_peak():
    cfg = {"kind": "daily", "duration_s": 20_000, "curve": {"kind": "constant", "rate_per_s": 1.0},
           "mean_rate_per_s": 10.0, "lengths": FIXED,
           "flash_sales": [{"start_s": 10_000, "ramp_s": 300, "hold_s": 1000, "decay_s": 300, "peak_multiplier": 5}]}
    wl = build_workload(cfg, 0)
    base = np.sum(wl.arrival_s < 10_000) / 10_000  # 100,000 arrivals: SE 0.3%
    peak = np.sum((wl.arrival_s >= 10_300) & (wl.arrival_s < 11_300)) / 1000  # 50,000: SE 0.45%
    assert base == pytest.approx(10.0, rel=0.02) and peak / base == pytest.approx(5.0, rel=0.03)


def test_sessions_share_prefix_blocks_with_plain_traffic_of_the_same_name():
    mix = build_workload({"kind": "mix", "parts": [
        KINDS["sessions"] | {"request_class": "cs"},
        {"kind": "poisson", "rate_per_s": 1.0, "duration_s": 600, "request_class": "qa", "shared_prefix_tokens": 1500,
         "shared_prefix_name": "cs", "lengths": {"kind": "fixed", "prompt_tokens": 2000, "output_tokens": 5}}]}, 0)
    first_blocks = {int(h[0]) for h in mix.prefix_hashes if len(h)}
    assert len(first_blocks) == 1  # the 1500-token shared prefix's first block (2 full blocks), same everywhere
    assert mix.session_id[mix.request_class == 1].max() == -1


def test_trace_with_transforms_and_classes():
    cfg = {"kind": "trace", "format": "mooncake", "path": "scenarios/samples/mooncake_conversation_head200.jsonl",
           "classes": {"kind": "by_length", "thresholds": [8192], "names": ["short", "long"],
                       "priority": {"short": 1}},
           "transforms": [{"kind": "scale_rate", "factor": 2.0}, {"kind": "scale_time", "factor": 0.5},
                          {"kind": "clip_lengths", "max_prompt_tokens": 16384},
                          {"kind": "assign_classes", "by": "by_length", "thresholds": [8192],
                           "names": ["short", "long"], "priority": {"short": 1}}],
           "num_requests": 300}
    wl = build_workload(cfg, 0)
    assert len(wl) == 300 and wl.prompt_tokens.max() <= 16384 and wl.class_names == ("short", "long")
    assert set(wl.priority[wl.prompt_tokens < 8192].tolist()) == {1}
    assert max(len(h) for h in wl.prefix_hashes) <= 32


def test_servegen_kind_window_and_scale():
    base = {"kind": "servegen", "path": "scenarios/samples/servegen_deepseek_r1", "start_s": 64_800,
            "duration_s": 7200}
    one, ten = build_workload(base, 0), build_workload(base | {"rate_scale": 10.0}, 0)
    assert one.arrival_s.max() < 7200 and len(ten) > 5 * max(len(one), 1)


def test_empirical_lengths_from_a_trace():
    wl = build_workload({"kind": "poisson", "rate_per_s": 10, "duration_s": 100, "lengths": {
        "kind": "empirical", "format": "azure", "path": "scenarios/samples/azure_conv_head200.csv"}}, 0)
    from scenarios.loaders import load_azure
    src = load_azure(REPO_ROOT / "scenarios/samples/azure_conv_head200.csv")
    assert set(zip(wl.prompt_tokens.tolist(), wl.output_tokens.tolist())) <= set(
        zip(src.prompt_tokens.tolist(), src.output_tokens.tolist()))


# -- paths ---------------------------------------------------------------------------------------------------
def test_relative_path_resolves_against_cwd_then_repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert len(build_workload(KINDS["trace"], 0)) == 200  # not in cwd: found under the repo root
    (tmp_path / "scenarios/samples").mkdir(parents=True)
    (tmp_path / "scenarios/samples/azure_code_head200.csv").write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:05,5,3\n")
    assert len(build_workload(KINDS["trace"], 0)) == 1  # cwd wins


@pytest.mark.shared_trace
def test_shared_prefix_path(real_trace):
    real_trace("azure-llm-2023/AzureLLMInferenceTrace_code.csv")
    wl = build_workload({"kind": "trace", "format": "azure",
                         "path": "shared:traces/azure-llm-2023/AzureLLMInferenceTrace_code.csv"}, 0)
    assert len(wl) == 8819


def test_missing_path():
    with pytest.raises(InputError, match=r"^traffic: traffic\.path: 'nope\.csv' does not exist \(tried .*nope\.csv"):
        build_workload({"kind": "trace", "format": "azure", "path": "nope.csv"}, 0)


# -- config errors -------------------------------------------------------------------------------------------
def test_unknown_kind_lists_choices():
    with pytest.raises(InputError) as err:
        build_workload({"kind": "poison", "rate_per_s": 1}, 0)
    assert str(err.value) == ("traffic: traffic.kind: unknown kind 'poison' (fix: use one of: poisson, gamma, mmpp, "
                              "daily, flash_sale, client_windows, sessions, servegen, trace, closed_loop, mix)")


def test_unknown_key_lists_valid_keys():
    with pytest.raises(InputError) as err:
        build_workload({**KINDS["poisson"], "rate": 3}, 0, file="conf/scenario/x.yaml")
    assert str(err.value) == (
        "conf/scenario/x.yaml: traffic.rate: unknown key (fix: valid keys: kind, request_class, priority, "
        "classes, transforms, num_requests, rate_per_s, duration_s, lengths, shared_prefix_tokens, "
        "shared_prefix_name, hash_block_tokens)")


@pytest.mark.parametrize("cfg,message", [
    ({"kind": "poisson", "duration_s": 10, "lengths": FIXED}, "traffic.rate_per_s: is missing"),
    ({"kind": "poisson", "rate_per_s": -1, "duration_s": 10, "lengths": FIXED}, "traffic.rate_per_s: must be > 0"),
    ({"kind": "poisson", "rate_per_s": "fast", "duration_s": 10, "lengths": FIXED},
     "traffic.rate_per_s: must be a finite number, got 'fast'"),
    ({"kind": "mmpp", "rates_per_s": [1, 2], "mean_dwell_s": [1], "duration_s": 10, "lengths": FIXED},
     "traffic.mean_dwell_s: must be a list of at least 2 numbers"),
    ({"kind": "mix", "parts": [{"kind": "poisson", "rate_per_s": 1, "duration_s": 1, "lengths": FIXED}]},
     "traffic.parts[0].name: a mix part needs a `name` or a `request_class`"),
    ({"kind": "mix", "parts": [KINDS["poisson"] | {"request_class": "a"}, KINDS["poisson"] | {"request_class": "a"}]},
     "traffic.parts[1].name: 'a' names two parts"),
    ({"kind": "mix", "request_class": "x", "parts": [KINDS["poisson"] | {"request_class": "a"}]},
     "traffic.request_class: unknown key"),
    ({**KINDS["poisson"], "transforms": [{"kind": "shuffle"}]}, "traffic.transforms[0].kind: unknown kind 'shuffle'"),
    ({**KINDS["poisson"], "transforms": [{"kind": "window", "start_s": 10, "end_s": 5}]},
     "traffic.transforms[0].end_s: (5) must exceed start_s (10)"),
    ({**KINDS["daily"], "peak_rate_per_s": 3}, "traffic.peak_rate_per_s: is given together with mean_rate_per_s"),
    ({**KINDS["servegen"], "clients": [99]}, "traffic.clients: client '99' is not in"),
    ({**KINDS["servegen"], "duration_s": 1e6}, "traffic.duration_s: start_s + duration_s = 1e+06 s is past"),
    ({"kind": "trace", "format": "csv", "path": "x"}, "traffic.format: unknown value 'csv' (fix: use one of: azure, "
                                                     "mooncake, burstgpt, generic)"),
    ({**KINDS["sessions"], "turns": {"kind": "uniform", "low": 5, "high": 2}}, "traffic.turns.(keys): the upper"),
    ({**KINDS["poisson"], "classes": {"kind": "mix", "weights": {"a": -1}}}, "traffic.classes.weights: must map"),
    ({"kind": "mix", "parts": [KINDS["sessions"] | {"request_class": "a"},
                               KINDS["sessions"] | {"request_class": "b", "hash_block_tokens": 16}]},
     "traffic.parts: parts use different hash_block_tokens [16, 512]"),
])
def test_config_errors(cfg, message):
    with pytest.raises(InputError) as err:
        build_workload(cfg, 0)
    assert str(err.value).startswith("traffic: " + message), str(err.value)
    assert "\n" not in str(err.value)


def test_daily_curve_from_servegen_data_and_harmonics():
    wl = build_workload({"kind": "daily", "duration_s": 86_400, "peak_rate_per_s": 20.0, "lengths": FIXED,
                         "curve": {"kind": "servegen", "path": "scenarios/samples/servegen_mm_image"}}, 0)
    from scenarios.loaders import load_servegen_pool
    starts, rate = load_servegen_pool(REPO_ROOT / "scenarios/samples/servegen_mm_image", with_lengths=False) \
        .aggregate_rate()
    expected = rate * 600 * 20.0 / rate.max()  # per 600-s window, scaled so the peak is 20 req/s
    counts = np.histogram(wl.arrival_s, bins=144, range=(0, 86_400))[0]
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected) + 1)  # Poisson counts, 5 sd per window
    h = build_workload({"kind": "daily", "duration_s": 86_400, "lengths": FIXED, "curve": {
        "kind": "harmonics", "rate_per_s": 2.0, "terms": [{"amplitude": 0.8, "period_s": 86_400, "peak_s": 3600}]}}, 0)
    assert len(h) / 86_400 == pytest.approx(2.0, rel=0.03)  # 172,800 arrivals: SE 0.24%
    per_hour = np.histogram(h.arrival_s, bins=24, range=(0, 86_400))[0]
    assert np.argmax(per_hour) in (0, 1) and np.argmin(per_hour) in (12, 13)


@pytest.mark.parametrize("kind", ["poisson", "gamma"])
def test_count_bounded_arrivals_without_duration(kind):
    # The form conf/scenario/smoke.yaml uses: a rate and a request count, no window length.
    cfg = {"kind": kind, "rate_per_s": 8.0, "num_requests": 20_000, "lengths": FIXED} | (
        {"cv": 2.0} if kind == "gamma" else {})
    wl = build_workload(cfg, 0)
    assert len(wl) == 20_000 and "duration_s" not in wl.metadata
    # 20,000 gaps of mean 1/8 s: the span's SE is cv·sqrt(n)/rate ≈ 35 s (cv 2) of 2,500 s, so 8% is > 5 SE.
    assert wl.arrival_s[-1] == pytest.approx(2500, rel=0.08)
    with pytest.raises(InputError, match=r"traffic\.duration_s: is missing \(and so is num_requests\)"):
        build_workload({k: v for k, v in cfg.items() if k != "num_requests"}, 0)


def test_docs_examples_are_valid():
    # Every yaml example in docs/scenarios.md parses and validates (generation is covered above).
    import re

    import yaml

    from scenarios.build import parse_traffic
    from scenarios.config_reader import ConfigReader
    from scenarios.length_config import lengths_from_config

    text = (REPO_ROOT / "docs/scenarios.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert len(blocks) >= 10
    shared = (shared_root() / "traces").exists()
    for block in blocks:
        if "shared:" in block and not shared:
            continue
        if block.lstrip().startswith("lengths:"):
            for line in block.strip().splitlines():
                lengths_from_config(ConfigReader(yaml.safe_load(line)["lengths"], where="lengths"))
        else:
            parse_traffic(ConfigReader(yaml.safe_load(block)["traffic"]))
