"""Qwen3.5-397B-A17B: Gated DeltaNet layers in the model spec, their fixed per-sequence state held out of the KV
memory, priced from the measured GDN kernels where a grid profile has them and by their roofline otherwise."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import yaml

from calibrate import ops
from calibrate.profile import load_profile
from inferplan.config.specs import LinearAttentionSpec
from inferplan.errors import InputError
from inferplan.paths import REPO_ROOT
from inferplan.specs import CONF_DIR, load_hardware, load_model
from sim.core.cost.deployment import parse_deployment
from sim.core.cost.factory import GRID_PROFILES_DIR
from sim.core.cost.layout import build_layout
from sim.core.cost.memory import plan_memory
from sim.core.cost.pricer import OpPricer
from sim.core.cost.roofline import LayeredCostModel
from sim.core.cost.weights import linear_state_bytes
from tests.cost.toys import EFF, GQA, decode, model, prefill, roof

NAME = "qwen3_5_397b_a17b"
LIN = LinearAttentionSpec(layers=(0,), num_key_heads=2, num_value_heads=4, key_head_dim=32, value_head_dim=32,
                          conv_kernel_tokens=4)
HYBRID = dataclasses.replace(GQA, num_layers=2, linear_attention=LIN)  # layer 0 linear, layer 1 full
FULL = dataclasses.replace(GQA, num_layers=2)
TOY_EFF = {**EFF, "linear_attn": 0.3}


def test_yaml_and_config_json_agree(tmp_path):
    m = load_model(NAME)
    la = m.linear_attention
    assert la is not None and len(la.layers) == 45 and m.num_layers - len(la.layers) == 15
    assert [i for i in range(60) if i not in la.layers] == list(range(3, 60, 4))  # every 4th layer full
    assert (la.num_key_heads, la.num_value_heads, la.key_head_dim, la.value_head_dim, la.conv_kernel_tokens,
            la.state_dtype) == (16, 64, 128, 128, 4, "fp32")
    assert (m.num_heads, m.num_kv_heads, m.head_dim, m.attention_output_gate) == (32, 2, 256, True)
    assert (m.moe.num_experts, m.moe.top_k, m.moe.expert_intermediate_size, m.moe.shared_experts) == (512, 10, 1024, 1)
    path = tmp_path / "config.json"  # the checkpoint's fields the loader reads (the language model: text_config)
    path.write_text(json.dumps({"model_type": "qwen3_5_moe", "text_config": {
        "model_type": "qwen3_5_moe_text", "num_hidden_layers": 60, "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 248320, "max_position_embeddings": 262144,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"], "num_experts": 512,
        "num_experts_per_tok": 10, "moe_intermediate_size": 1024, "shared_expert_intermediate_size": 1024,
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
        "linear_num_value_heads": 64, "linear_value_head_dim": 128, "attn_output_gate": True,
        "mamba_ssm_dtype": "float32", "mtp_num_hidden_layers": 1}}))
    cfg = json.loads(path.read_text())
    cfg["text_config"]["layer_types"] *= 15
    path.write_text(json.dumps(cfg))
    hf = load_model(str(path))
    fields = ("num_layers", "hidden_size", "vocab_size", "num_heads", "num_kv_heads", "head_dim", "moe",
              "linear_attention", "attention_output_gate", "mtp_modules", "max_context_tokens")
    assert {f: getattr(hf, f) for f in fields} == {f: getattr(m, f) for f in fields}


def test_bad_linear_attention_names_the_field(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("num_layers: 4\nhidden_size: 64\nvocab_size: 10\nattention: {kind: gqa, num_heads: 2, "
                    "num_kv_heads: 1, head_dim: 32, linear_attention: {num_key_heads: 1, num_value_heads: 2, "
                    "key_head_dim: 16, value_head_dim: 16, conv_kernel_tokens: 4}}\nffn: {intermediate_size: 128}\n")
    with pytest.raises(InputError, match="linear_attention.full_attention_interval"):
        load_model(str(path))


def test_published_parameter_count():
    from tests.cost.test_models import params
    # model card: 397 B parameters, the vision encoder included (not counted here)
    assert params(NAME) / 1e9 == pytest.approx(397.0, rel=5e-3)


def test_state_per_sequence_and_kv_per_token():
    m = load_model(NAME)
    # recurrent state 64 value heads x 128 x 128 in fp32 (config mamba_ssm_dtype) + the convolution's last 3
    # inputs over q, k, v channels (2 x 16 x 128 + 64 x 128 = 12288) in bf16, per layer; TP shards both
    assert linear_state_bytes(m, 1) == 64 * 128 * 128 * 4 + 3 * 12288 * 2 == 4_268_032
    assert linear_state_bytes(m, 8) == linear_state_bytes(m, 1) / 8
    assert 45 * linear_state_bytes(m, 1) / 1e6 == pytest.approx(192.06, abs=0.01)  # MB per sequence
    h200 = load_hardware("h200")
    dep = parse_deployment(None, tp=8, weights_dtype="fp8", where="test")
    lay = build_layout(m, dep, "test")

    def plan(seqs: int):
        return plan_memory(m, h200, dep, lay, kv_dtype="bf16", block_size_tokens=16, gpu_memory_utilization=0.9,
                           token_budget=8192, fixed_reserve_bytes=0.0, state_seqs=seqs)

    # KV per token: the 15 full-attention layers only, 2 KV heads of 256 over 8 GPUs (one head each), bf16
    assert plan(0).kv_bytes_per_token == 8 * 15 * 2 * 1 * 256 * 2
    assert plan(0).kv_wire_bytes_per_token == 15 * 2 * 2 * 256 * 2
    held = plan(256).per_device[0].activation_reserve_bytes - plan(0).per_device[0].activation_reserve_bytes
    assert held == pytest.approx(256 * 45 * linear_state_bytes(m, 8))
    assert plan(256).num_blocks < plan(0).num_blocks


def _attention(m, b) -> float:
    return model(m, eff=TOY_EFF).step_cost(b).parts["attention"]


def test_linear_layer_decode_does_not_grow_with_the_context():
    short, long = decode(4, 100), decode(4, 20_000)
    full_growth = _attention(FULL, long) - _attention(FULL, short)
    assert _attention(HYBRID, long) - _attention(HYBRID, short) == pytest.approx(full_growth / 2, rel=1e-9)


def test_linear_layer_analytical_decode_is_the_roofline_of_its_two_kernels():
    seqs = 4
    full_layer = _attention(FULL, decode(seqs, 100)) / 2
    linear_layer = _attention(HYBRID, decode(seqs, 100)) - full_layer
    channels = 2 * 2 * 32 + 4 * 32
    conv = roof(*ops.gdn_conv_work(seqs, seqs, channels, 4), TOY_EFF["linear_attn"])
    rec = roof(*ops.gdn_recurrent_work(seqs, 4, 2, 32, 32), TOY_EFF["linear_attn"])
    assert linear_layer == pytest.approx(conv + rec, rel=1e-9)


def test_linear_layer_prefill_ignores_the_cached_context():
    # a 512-token chunk after 0 or after 8192 cached tokens: the linear layer costs the same
    fresh, later = prefill(1, 512), prefill(1, 512, 8192)
    full_diff = _attention(FULL, later) - _attention(FULL, fresh)
    assert _attention(HYBRID, later) - _attention(HYBRID, fresh) == pytest.approx(full_diff / 2, rel=1e-9)


def _grid_model(hardware: str, engine: str, role: str) -> LayeredCostModel:
    hw = load_hardware(hardware)
    rf = yaml.safe_load((CONF_DIR / "cost" / "roofline.yaml").read_text())
    profile = load_profile(GRID_PROFILES_DIR / hardware / f"{engine}.parquet")
    m = load_model(NAME)
    dep = parse_deployment({"ep": 8}, tp=8, weights_dtype="fp8", where="test")
    return LayeredCostModel(m, hw, OpPricer(hw, rf["efficiency"], rf["launch_s"], profile), tp=8,
                            weights_dtype="fp8", deployment=dep, role=role)


def test_measured_gdn_kernels_price_the_linear_layers_where_the_grid_has_them():
    d = _grid_model("h200", "sglang", "unified").describe()
    for op in ("gdn_conv_prefill", "gdn_chunk_prefill", "gdn_conv_decode", "gdn_recurrent_decode"):
        assert f"{op}/bf16" in d["measured_ops"]
    assert "linear_attn/bf16" not in d["analytical_ops"]


def test_gdn_kernels_the_grid_lacks_fall_back_to_the_roofline_with_the_reason():
    # A100's newest SGLang table measured the convolution and the recurrent decode, not the chunked prefill
    cm = _grid_model("a100_80gb", "sglang", "unified")
    cm.step_cost(prefill(2, 1024))
    d = cm.describe()
    assert "gdn_conv_prefill/bf16" in d["measured_ops"] and "gdn_recurrent_decode/bf16" in d["measured_ops"]
    assert "gdn_chunk_prefill/bf16" in d["analytical_ops"] and "linear_attn/bf16" in d["analytical_ops"]
    assert "gdn_chunk_prefill/bf16" in d["fallback"]


def test_smoke_run_of_the_model(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "sim", "scenario=smoke", "metrics.progress=false",
                           f"scenario.pools.main.model={NAME}", "scenario.pools.main.hardware=h200",
                           "++scenario.pools.main.tp=8", "engine=sglang_v05_serve", "scenario.traffic.num_requests=60",
                           "scenario.traffic.rate_per_s=2.0", f"hydra.run.dir={out}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})  # (this checkout's packages)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    cm = summary["pools"]["main"]["cost_model"]
    assert "gdn_recurrent_decode/bf16" in cm["measured_ops"]
    assert summary["requests"]["completed"] == 60


def test_gdn_table_imports_by_phase_and_kernel_and_prices_its_measured_points(tmp_path):
    import pandas as pd

    from calibrate.aic.convert import convert
    from calibrate.aic.db import AicDb
    from calibrate.aic.grid_model import GridModel
    from calibrate.import_aic import peaks_of
    from tests.calibrate.test_import_aic import _write, write_db

    systems = write_db(tmp_path)
    rows = []
    for vh, kh in ((8, 2), (16, 4)):
        heads = {"num_v_heads": vh, "num_k_heads": kh}
        for b in (1, 4, 16):
            for s in (64, 1024, 8192):
                for kernel in ("causal_conv1d_fn", "chunk_gated_delta_rule", "some_other_kernel"):
                    rows.append({"kernel_source": kernel, "phase": "context", "batch_size": b, "seq_len": s,
                                 "num_tokens": b * s, "latency": 0.01 + 1e-6 * b * s * vh, **heads})
            for kernel in ("causal_conv1d_update", "fused_recurrent_gated_delta_rule"):
                rows.append({"kernel_source": kernel, "phase": "generation", "batch_size": b, "seq_len": 1,
                             "num_tokens": b, "latency": 0.005 + 1e-4 * b * vh, **heads})
    df = pd.DataFrame(rows).assign(framework="VLLM", version="0.24.0", device="NVIDIA H100 80GB HBM3", op_name="gdn",
                                   d_model=4096, d_conv=4, head_k_dim=128, head_v_dim=128,
                                   model_name="Qwen/Qwen3.5-397B-A17B")
    _write(systems / "data" / "h100_sxm" / "linear_attention" / "vllm" / "0.24.0", "gdn_perf", df, "vllm", "0.24.0")
    columns, prov = convert(AicDb(systems), "h100_sxm", "vllm")
    fam = columns["family"]
    assert (fam == "gdn_prefill").sum() == 2 * 9 * 2 and (fam == "gdn_decode").sum() == 2 * 3 * 2
    assert prov["families"]["gdn_prefill"]["skipped"] == {"kernel some_other_kernel": 18}
    assert set(columns["op"][fam == "gdn_decode"]) == {"gdn_conv_decode", "gdn_recurrent_decode"}
    grid = GridModel(columns, peaks_of("h100_sxm")[0])
    assert grid.latency_s("gdn_recurrent_decode", batch=4, heads=8, kv_heads=2, head_dim=128) == pytest.approx(
        (0.005 + 1e-4 * 4 * 8) * 1e-3, rel=1e-6)
    assert grid.latency_s("gdn_chunk_prefill", batch=4, seq=1024, heads=16, kv_heads=4, head_dim=128) == \
        pytest.approx((0.01 + 1e-6 * 4 * 1024 * 16) * 1e-3, rel=1e-6)
