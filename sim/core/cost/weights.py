"""Weight and KV bytes: parameter counts of the model's pieces, and what one device of a stage holds.

Formats per weight group come from the deployment (`attention`, `ffn`, `shared_experts`, `experts`, `lm_head`, each
a `calibrate.ops.DTYPES` format whose bytes include its scales); the embedding, norms and MoE router stay bf16.
A multi-token-prediction module (loaded only when the deployment drafts with it, as vLLM and SGLang do) is one more
layer of the model's last kind plus its `eh_proj` (2H x H) and two norms, on the last stage.
"""
from __future__ import annotations

from calibrate.ops import check_dtype
from inferplan.specs import ModelSpec
from inferplan.config.deployment import Deployment
from sim.core.cost.layout import Layout, Stage

BF16_BYTES = 2.0


def attention_params(m: ModelSpec) -> float:
    """Parameters of one layer's attention projections: the mean over the model's layers where some are linear
    attention (exact for a stage holding both kinds in the model's proportion)."""
    la = m.linear_attention
    if la is None:
        return softmax_attention_params(m)
    share = m.linear_layer_share
    return (1.0 - share) * softmax_attention_params(m) + share * linear_attention_params(m)


def linear_attention_params(m: ModelSpec) -> float:
    """Parameters of one Gated DeltaNet layer: the input projection to queries, keys, values and the output gate
    plus the two per-value-head gates, the depthwise convolution, the per-head decay and step bias, and the output
    projection."""
    la = m.linear_attention
    assert la is not None
    H, v = m.hidden_size, la.num_value_heads * la.value_head_dim
    in_proj = H * (2 * la.num_key_heads * la.key_head_dim + 2 * v + 2 * la.num_value_heads)
    return in_proj + la.conv_channels * la.conv_kernel_tokens + 2 * la.num_value_heads + v * H


def softmax_attention_params(m: ModelSpec) -> float:
    """Parameters of one softmax-attention layer's projections (GQA or MLA)."""
    h, H = m.num_heads, m.hidden_size
    if m.attention_kind == "gqa":
        gate = h * m.head_dim * H if m.attention_output_gate else 0
        return H * (h + 2 * m.num_kv_heads) * m.head_dim + h * m.head_dim * H + gate
    q = (H * m.q_lora_rank + m.q_lora_rank * h * m.head_dim) if m.q_lora_rank else H * h * m.head_dim
    kv = H * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
    return q + kv + h * m.v_head_dim * H


def ffn_params(m: ModelSpec, intermediate: int) -> float:
    """Parameters of one (gated or plain) MLP of the given intermediate size."""
    return (3 if m.ffn_kind == "gated" else 2) * m.hidden_size * intermediate


def kv_elem_bytes(kv_dtype: str) -> float:
    """Bytes per cached K/V element: plain fp8 has a per-tensor scale (1 byte); other formats as in DTYPES."""
    return 1.0 if kv_dtype == "fp8" else check_dtype(kv_dtype)["act_bytes"]


def kv_layer_bytes(m: ModelSpec, dep: Deployment, kv_dtype: str, tp: int) -> float:
    """KV bytes one token adds to one layer on one device: GQA shards KV heads over TP (at least one head per
    device); MLA's latent (kv_lora_rank + rope dims) and a sparse-attention indexer key are held whole by every
    TP rank. `tp=1` gives the bytes of one copy (what a prefill -> decode hand-off moves)."""
    kb = kv_elem_bytes(kv_dtype)
    if m.attention_kind == "mla":
        per = (m.kv_lora_rank + m.qk_rope_head_dim) * kb
    else:
        per = 2 * max(1.0, m.num_kv_heads / tp) * m.head_dim * kb
    s = dep.sparse_attention
    if s is not None:
        per += s.indexer_head_dim * check_dtype(s.indexer_dtype)["act_bytes"]
    return per


def linear_state_bytes(m: ModelSpec, tp: int) -> float:
    """Bytes of one sequence's state in one linear-attention layer on one device: the recurrent state (value heads
    x key dim x value dim) in its format and the convolution's last kernel - 1 inputs; TP shards the heads (at
    least one value head per device) and the convolution's channels."""
    la = m.linear_attention
    if la is None:
        return 0.0
    heads = max(1.0, la.num_value_heads / tp)
    state = heads * la.key_head_dim * la.value_head_dim * check_dtype(la.state_dtype)["act_bytes"]
    conv = (la.conv_kernel_tokens - 1) * la.conv_channels / tp * check_dtype(la.conv_dtype)["act_bytes"]
    return state + conv


def stage_layers(m: ModelSpec, dep: Deployment, st: Stage) -> tuple[int, int]:
    """(dense, MoE) layers a stage holds and runs, counting the MTP module as one more layer on the last stage."""
    extra = m.mtp_modules if (dep.mtp is not None and st.last) else 0
    if m.moe is not None:
        return st.dense_layers, st.moe_layers + extra
    return st.dense_layers + extra, st.moe_layers


def device_weight_bytes(m: ModelSpec, dep: Deployment, lay: Layout, st: Stage) -> dict[str, float]:
    """Bytes of weights on one device of stage `st`, by component (GPU-resident; cold experts excluded)."""
    wb = {g: check_dtype(f)["weight_bytes"] for g, f in dep.weights.items()}
    tp, H = lay.tp, m.hidden_size
    dense, moe = stage_layers(m, dep, st)
    out = {"attention": (dense + moe) * attention_params(m) * wb["attention"] / tp,
           "ffn": dense * ffn_params(m, m.intermediate_size) * wb["ffn"] / tp,
           "norms": (2 * (dense + moe) + (1 if st.last else 0)) * H * BF16_BYTES}
    if m.moe is not None:
        e = m.moe
        expert = ffn_params(m, e.expert_intermediate_size)
        hot_slots = lay.expert_slots_per_layer - lay.cold_experts
        out["shared_experts"] = moe * e.shared_experts * expert * wb["shared_experts"] / tp
        out["experts"] = moe * hot_slots * lay.expert_share_per_device * expert * wb["experts"]
        out["router"] = moe * H * e.num_experts * BF16_BYTES
    if st.first:
        out["embedding"] = m.vocab_size * H * BF16_BYTES / tp
    if st.last:
        out["lm_head"] = m.vocab_size * H * wb["lm_head"] / tp
        if dep.mtp is not None:
            out["mtp_proj"] = m.mtp_modules * (2 * H * H * wb["attention"] / tp + 2 * H * BF16_BYTES)
    return out


def device_host_weight_bytes(m: ModelSpec, dep: Deployment, lay: Layout, st: Stage) -> float:
    """Bytes of cold experts one device of stage `st` keeps in host memory (fetched over its host link)."""
    if m.moe is None or not lay.cold_experts:
        return 0.0
    _, moe = stage_layers(m, dep, st)
    expert = ffn_params(m, m.moe.expert_intermediate_size) * check_dtype(dep.weights["experts"])["weight_bytes"]
    return moe * lay.cold_experts * lay.expert_share_per_device * expert


def expert_bytes_per_device(m: ModelSpec, dep: Deployment, lay: Layout) -> float:
    """Bytes of one routed expert's share that one device holds (1/moe_tp of it under EP: a whole expert when every
    device is its own EP rank; 1/tp of it otherwise)."""
    assert m.moe is not None
    expert = ffn_params(m, m.moe.expert_intermediate_size) * check_dtype(dep.weights["experts"])["weight_bytes"]
    return expert / lay.moe_tp
