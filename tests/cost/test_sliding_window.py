"""gpt-oss: sliding-window layers priced at the windowed context, their KV held per sequence, attention sinks free,
MXFP4 experts at 4.25 bits per weight (weight-only on Hopper, FP4 peak where the GPU has one)."""
from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from calibrate import ops
from calibrate.profile import load_profile
from inferplan.errors import InputError
from inferplan.specs import CONF_DIR, load_hardware, load_model
from sim.core.cost.deployment import parse_deployment
from sim.core.cost.layout import build_layout
from sim.core.cost.memory import plan_memory
from sim.core.cost.factory import GRID_PROFILES_DIR
from sim.core.cost.pricer import OpPricer
from sim.core.cost.roofline import LayeredCostModel
from sim.core.cost.weights import device_weight_bytes
from tests.cost.toys import EFF, GQA, TOY_HW, decode, model, prefill

W = 64  # the toys' window
SLIDING = dataclasses.replace(GQA, num_layers=2, sliding_window_tokens=W, sliding_window_layers=(0,))
FULL = dataclasses.replace(GQA, num_layers=2)


def attention_s(m, b) -> float:
    return model(m).step_cost(b).parts["attention"]


def test_gpt_oss_yaml_and_config_json_agree(tmp_path):
    m = load_model("gpt_oss_120b")
    assert (m.sliding_window_tokens, m.sliding_window_layers) == (128, tuple(range(0, 36, 2)))
    assert m.sliding_layer_share == 0.5 and m.attention_sinks
    assert (m.num_heads, m.num_kv_heads, m.head_dim, m.moe.num_experts, m.moe.top_k) == (64, 8, 64, 128, 4)
    path = tmp_path / "config.json"  # the checkpoint's config.json fields the loader reads
    path.write_text(json.dumps({
        "model_type": "gpt_oss", "num_hidden_layers": 36, "hidden_size": 2880, "intermediate_size": 2880,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 201088,
        "max_position_embeddings": 131072, "num_local_experts": 128, "num_experts_per_tok": 4,
        "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 18}))
    hf = load_model(str(path))
    fields = ("num_layers", "hidden_size", "vocab_size", "num_heads", "num_kv_heads", "head_dim", "moe",
              "sliding_window_tokens", "sliding_window_layers", "attention_sinks")
    assert {f: getattr(hf, f) for f in fields} == {f: getattr(m, f) for f in fields}


def test_bad_sliding_window_layers_name_the_field(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("num_layers: 4\nhidden_size: 64\nvocab_size: 10\nattention: {kind: gqa, num_heads: 2, "
                    "num_kv_heads: 1, head_dim: 32, sliding_window: {tokens: 8, layers: [0, 9]}}\n"
                    "ffn: {intermediate_size: 128}\n")
    with pytest.raises(InputError, match="sliding_window.layers"):
        load_model(str(path))


def test_short_contexts_price_as_full_attention():
    # every query has fewer than W keys: the window changes nothing
    assert attention_s(SLIDING, prefill(2, W // 2)) == attention_s(FULL, prefill(2, W // 2))
    assert attention_s(SLIDING, decode(4, W - 2)) == attention_s(FULL, decode(4, W - 2))


def test_decode_sliding_layer_reads_the_window_only():
    # layer 0 reads W tokens per sequence, layer 1 the whole 4096: the mean of the two full-model prices
    ctx = 4096
    full, windowed = attention_s(FULL, decode(4, ctx)), attention_s(FULL, decode(4, W - 1))
    assert attention_s(SLIDING, decode(4, ctx)) == pytest.approx((full + windowed) / 2, rel=1e-12)


def test_prefill_sliding_layer_attends_window_pairs():
    # a 2048-token chunk after 2048 cached tokens: every query has at least W earlier positions, so the windowed
    # layer attends exactly tokens x W pairs (4 h d flops each; compute-bound on the toy GPU)
    q = 2048
    b = prefill(1, q, q)
    full = attention_s(FULL, b) / 2  # one layer
    windowed = attention_s(SLIDING, b) - full  # two layers at the mean of full and windowed
    flops = 4.0 * GQA.num_heads * GQA.head_dim * q * W
    assert windowed == pytest.approx(flops / 1e12 / EFF["attn_prefill"], rel=1e-9)
    assert windowed < full / 20


def test_sinks_add_no_op():
    sunk = dataclasses.replace(SLIDING, attention_sinks=True)
    for b in (prefill(2, 300), decode(3, 500)):
        assert model(sunk).step_cost(b).total_s == model(SLIDING).step_cost(b).total_s


def _plan(m, seqs: int = 0):
    dep = parse_deployment(None, tp=1, weights_dtype="bf16", where="test")
    return plan_memory(m, TOY_HW, dep, build_layout(m, dep, "test"), kv_dtype="bf16", block_size_tokens=16,
                       gpu_memory_utilization=0.9, token_budget=1024, fixed_reserve_bytes=0.0, state_seqs=seqs)


def test_kv_per_token_counts_full_layers_and_the_window_is_held_per_sequence():
    per_layer = 2 * GQA.num_kv_heads * GQA.head_dim * 2.0
    assert _plan(FULL).kv_bytes_per_token == 2 * per_layer
    assert _plan(SLIDING).kv_bytes_per_token == per_layer
    held = _plan(SLIDING, 10).per_device[0].activation_reserve_bytes - _plan(SLIDING).per_device[0].activation_reserve_bytes
    assert held == pytest.approx(10 * (W + 16) * per_layer)


def test_mxfp4_is_4_25_bits_weight_only_on_hopper_and_fp4_on_blackwell():
    assert ops.DTYPES["mxfp4"]["weight_bytes"] * 8 == 4.25
    h100, b200 = load_hardware("h100_sxm"), load_hardware("b200")
    assert h100.peak_for(ops.DTYPES["mxfp4"]["compute"]) == h100.peak_flops_per_s["bf16"]
    assert b200.peak_for(ops.DTYPES["mxfp4"]["compute"]) == b200.peak_flops_per_s["fp4"]
    m = load_model("gpt_oss_120b")
    dep = parse_deployment({"weights": {"experts": "mxfp4"}}, tp=1, weights_dtype="bf16", where="test")
    w = device_weight_bytes(m, dep, build_layout(m, dep, "test"), build_layout(m, dep, "test").stages[0])
    # 36 layers x 128 experts x 3 x 2880 x 2880 weights at 4.25 bits: 60.9 GB; with bf16 attention (1.9 GB),
    # embedding and LM head (2.3 GB): 65.2 GB, the size of the published checkpoint (model card: 117 B parameters)
    assert w["experts"] == pytest.approx(36 * 128 * 3 * 2880 * 2880 * 4.25 / 8, rel=1e-12)
    assert sum(w.values()) / 1e9 == pytest.approx(65.2, abs=0.1)


def test_mxfp4_experts_priced_at_their_bytes_in_decode():
    moe = load_model("gpt_oss_120b")
    bf16 = model(moe, hw=load_hardware("h100_sxm")).step_cost(decode(8, 1000)).parts["moe_gemm"]
    fp4 = model(moe, hw=load_hardware("h100_sxm"),
                deployment={"weights": {"experts": "mxfp4"}}).step_cost(decode(8, 1000)).parts["moe_gemm"]
    assert fp4 < bf16 / 3  # decode's experts are weight-read bound: 4.25 bits against 16


def test_gpt_oss_mxfp4_experts_and_windowed_attention_from_the_h100_grid():
    """The vLLM grid measured the MXFP4 expert block (w4a16_mxfp4) at gpt-oss's shapes: a pool of the checkpoint's
    formats prices its experts and attention from it, the sliding layers' decode at the windowed context."""
    h100 = load_hardware("h100_sxm")
    rf = yaml.safe_load((CONF_DIR / "cost" / "roofline.yaml").read_text())
    profile = load_profile(GRID_PROFILES_DIR / "h100_sxm" / "vllm.parquet")
    m = load_model("gpt_oss_120b")
    dep = parse_deployment({"weights": {"experts": "mxfp4"}}, tp=2, weights_dtype="bf16", where="test")
    cm = LayeredCostModel(m, h100, OpPricer(h100, rf["efficiency"], rf["launch_s"], profile), tp=2,
                          deployment=dep, role="decode")
    d = cm.describe()
    assert "moe_gemm/mxfp4" in d["measured_ops"] and "attn_decode/bf16" in d["measured_ops"]
    full = dataclasses.replace(m, sliding_window_tokens=0, sliding_window_layers=())
    plain = LayeredCostModel(full, h100, OpPricer(h100, rf["efficiency"], rf["launch_s"], profile), tp=2,
                             deployment=dep, role="decode")
    long = decode(64, 8000)
    windowed, unwindowed = cm.step_cost(long).parts["attention"], plain.step_cost(long).parts["attention"]
    assert 0.4 * unwindowed < windowed < 0.75 * unwindowed  # half the layers read 128 of 8000 tokens


def test_gpt_oss_has_its_published_parameter_count():
    from tests.cost.test_models import params
    # model card: 116.8 B parameters (the attention and expert biases, 0.1%, are not counted)
    assert params("gpt_oss_120b") / 1e9 == pytest.approx(116.8, rel=2e-3)
