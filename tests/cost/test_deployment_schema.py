"""The `deployment:` mapping: presets, overrides, defaults and the errors bad input gets."""
from __future__ import annotations

import pytest

from inferplan.errors import InputError
from inferplan.specs import load_model
from sim.core.cost.deployment import parse_deployment
from sim.core.cost.layout import build_layout


def parse(raw, tp=1, weights="bf16"):
    return parse_deployment(raw, tp=tp, weights_dtype=weights, where="scenario/s: pools.p")


def test_defaults_are_one_replica_on_tp_devices():
    dep = parse(None, tp=4, weights="int8")
    assert (dep.tp, dep.dp, dep.ep, dep.pp, dep.devices) == (4, 1, 1, 1, 4)
    assert dep.weights == {"attention": "int8", "ffn": "int8", "shared_experts": "int8", "experts": "int8",
                           "lm_head": "bf16"}
    assert dep.mtp is None and dep.sparse_attention is None and dep.communication.overlap == "none"


def test_deepseek_presets_and_inline_overrides():
    dep = parse({"preset": "deepseek_v3_decode", "experts": {"imbalance": 1.2}, "host": {"step_overhead_s": 0.001}})
    assert (dep.dp, dep.ep, dep.devices, dep.preset) == (144, 144, 144, "deepseek_v3_decode")
    assert dep.experts.redundant == 32 and dep.experts.imbalance == 1.2       # merged key by key
    assert dep.weights["experts"] == "fp8_block" and dep.weights["lm_head"] == "bf16"
    assert dep.communication.dispatch_dtype == "fp8_block" and dep.communication.combine_dtype == "bf16"
    assert dep.tokens_per_step == pytest.approx(1.85)
    lay = build_layout(load_model("deepseek_v3"), dep, "t")
    assert lay.expert_slots_per_layer * lay.expert_share_per_device == 2
    prefill = build_layout(load_model("deepseek_v3"), parse({"preset": "deepseek_v3_prefill"}), "t")
    assert prefill.devices == 32 and prefill.expert_slots_per_layer / prefill.ep == 9


@pytest.mark.parametrize("raw, message", [
    ({"bogus": 1}, r"deployment.bogus: unknown key \(fix: valid keys: dp, ep, pp"),
    ({"experts": {"hot": 1}}, r"deployment.experts.hot: unknown key \(fix: valid keys: redundant, imbalance"),
    ({"dp": 0}, r"deployment.dp: must be >= 1, got 0 \(fix: use a value >= 1\)"),
    ({"dp": "four"}, r"deployment.dp: must be an integer, got 'four'"),
    ({"tp": 8}, r"deployment.tp: tensor parallelism is the pool's own `tp:` field"),
    ({"preset": "nope"}, r"deployment.preset: unknown preset 'nope' \(fix: use one of: deepseek_v3_decode, "
                         r"deepseek_v3_prefill"),
    ({"role": "prefill"}, r"deployment.role: unknown key \(fix: valid keys: dp, ep"),
    ({"weights": {"experts": "fp4"}}, r"deployment.weights.experts: unknown value 'fp4' \(fix: use one of: fp32, bf16"),
    ({"mtp": {"draft_tokens": 2, "acceptance": [0.8]}}, r"deployment.mtp.acceptance: needs 2 probabilities"),
    ({"experts": {"cold_fraction": 1.0}}, r"deployment.experts.cold_fraction: must be < 1, got 1"),
    ({"communication": {"overlap": "dbo"}}, r"deployment.communication.overlap: unknown value 'dbo' "
                                            r"\(fix: use one of: none, two_micro_batches"),
    ({"experts": "many"}, r"deployment.experts: expected a mapping"),
])
def test_bad_values_name_the_pool_and_key(raw, message):
    with pytest.raises(InputError, match=r"^scenario/s: pools.p: " + message):
        parse(raw)


@pytest.mark.parametrize("model, raw, message", [
    ("llama3_8b", {"dp": 2, "ep": 2}, r"deployment.ep: llama3_8b has no routed experts"),
    ("deepseek_v3", {"dp": 8, "ep": 3}, r"deployment.ep: must divide tp x dp = 8 .*\(fix: set ep to one of "
                                        r"\{1, 2, 4, 8\}\)"),
    ("deepseek_v3", {"dp": 8, "ep": 4}, r"deployment.ep: ep=4 with dp=8 splits each expert over 2 devices under "
                                        r"attention DP: .* not modelled"),
    ("deepseek_v3", {"dp": 24, "ep": 24}, r"deployment.experts.redundant: 256 experts \+ 0 redundant do not split "
                                          r"evenly over ep=24"),
    ("deepseek_v3", {"experts": {"redundant": 8}}, r"redundant replicas need expert parallelism"),
    ("mixtral_8x7b", {"experts": {"load_histogram": [1, 2]}}, r"has 2 entries, the model has 8 experts"),
    ("llama3_8b", {"pp": 40}, r"deployment.pp: 40 stages for 32 layers"),
    ("llama3_8b", {"experts": {"cold_fraction": 0.5}}, r"deployment.experts: llama3_8b has no routed experts"),
])
def test_model_mismatches_are_input_errors(model, raw, message):
    with pytest.raises(InputError, match=message):
        build_layout(load_model(model), parse(raw), "scenario/s: pools.p")


@pytest.mark.parametrize("model, tp, ok", [
    ("llama3_8b", 3, False),    # 32 heads, 8 KV heads
    ("llama3_8b", 16, True),    # more ranks than KV heads: each KV head replicated on 2 ranks
    ("llama3_8b", 8, True),
    ("deepseek_v3", 3, False),  # MLA: 128 heads
])
def test_tp_must_shard_heads_and_mlp_evenly(model, tp, ok):
    from sim.core.cost.layout import tp_shards
    m = load_model(model)
    assert (not tp_shards(m, tp, 1)) is ok
