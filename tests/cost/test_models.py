"""conf/model entries load with their published sizes; Hugging Face config.json files load into the same specs."""
from __future__ import annotations

import dataclasses
import json

import pytest

from inferplan.specs import available, load_model
from sim.core.cost.weights import attention_params, ffn_params


def params(name_or_path: str) -> float:
    """Parameters of the whole model (the MTP module excluded), from the shapes."""
    m = load_model(name_or_path)
    dense_layers = m.num_layers - m.num_moe_layers
    total = m.num_layers * attention_params(m) + dense_layers * ffn_params(m, m.intermediate_size)
    if m.moe is not None:
        e = m.moe
        total += m.num_moe_layers * (ffn_params(m, e.expert_intermediate_size) * (e.num_experts + e.shared_experts)
                                     + m.hidden_size * e.num_experts)
    return total + 2 * m.vocab_size * m.hidden_size


@pytest.mark.parametrize("name, billions", [
    ("llama3_8b", 8.03), ("llama3_70b", 70.55), ("qwen2_5_72b", 72.7), ("mixtral_8x7b", 46.7),
    ("deepseek_r1_distill_qwen_7b", 7.6), ("deepseek_v3", 671.0)])
def test_models_have_their_published_parameter_counts(name, billions):
    # Model cards: Llama-3 8B/70B (8.03 B, 70.55 B), Qwen2.5-72B 72.7 B, Mixtral 46.7 B, the R1 distill 7.6 B,
    # DeepSeek-V3 671 B (+14 B MTP). Biases and tied details are below 0.5%.
    assert params(name) / 1e9 == pytest.approx(billions, rel=5e-3)


def test_every_conf_model_loads():
    for name in available("model"):
        m = load_model(name)
        assert m.num_layers > 0 and m.hidden_size > 0 and m.name


def test_llama_config_json(tmp_path):
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "intermediate_size": 28672,
           "max_position_embeddings": 8192, "num_attention_heads": 64, "num_hidden_layers": 80,
           "num_key_value_heads": 8, "vocab_size": 128256, "_name_or_path": "meta-llama/Meta-Llama-3-70B"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    spec, ours = load_model(str(path)), load_model("llama3_70b")
    assert dataclasses.replace(spec, name="", source="") == dataclasses.replace(ours, name="", source="")
    assert spec.name == "meta-llama/Meta-Llama-3-70B"


def test_deepseek_v3_config_json(tmp_path):
    cfg = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "intermediate_size": 18432,
           "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
           "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
           "qk_rope_head_dim": 64, "v_head_dim": 128, "num_attention_heads": 128, "num_key_value_heads": 128,
           "num_hidden_layers": 61, "vocab_size": 129280, "num_nextn_predict_layers": 1,
           "max_position_embeddings": 131072}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    spec, ours = load_model(str(path)), load_model("deepseek_v3")
    assert dataclasses.replace(spec, name="", source="") == dataclasses.replace(ours, name="", source="")
    assert spec.attention_kind == "mla" and spec.num_moe_layers == 58 and spec.mtp_modules == 1
