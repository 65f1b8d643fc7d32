"""Memory arithmetic of one instance: weight bytes, KV bytes per token, and the KV-cache capacity left.

An instance is `tp` devices holding one replica of the model. Capacity = tp x device memory x
`gpu_memory_utilization` - weights - activation reserve; what remains holds KV blocks of `block_size_tokens`.
"""
from __future__ import annotations

from dataclasses import dataclass

from calibrate.ops import check_dtype
from inferplan.specs import HardwareSpec, ModelSpec


def attention_params(m: ModelSpec) -> float:
    """Parameters of one layer's attention projections."""
    h, H = m.num_heads, m.hidden_size
    if m.attention_kind == "gqa":
        return H * (h + 2 * m.num_kv_heads) * m.head_dim + h * m.head_dim * H
    q = (H * m.q_lora_rank + m.q_lora_rank * h * m.head_dim) if m.q_lora_rank else H * h * m.head_dim
    kv = H * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
    return q + kv + h * m.v_head_dim * H


def ffn_params(m: ModelSpec, intermediate: int) -> float:
    """Parameters of one (gated or plain) MLP of the given intermediate size."""
    return (3 if m.ffn_kind == "gated" else 2) * m.hidden_size * intermediate


def weight_bytes(m: ModelSpec, weights_dtype: str) -> float:
    """Bytes of one full replica: layer matrices in `weights_dtype`, embeddings, LM head and norms in bf16.

    MoE layers hold every routed and shared expert plus the router; multi-token-prediction modules count as one
    extra full layer each (DeepSeek-V3's MTP module is one transformer block plus a projection).
    """
    wb = check_dtype(weights_dtype)["weight_bytes"]
    dense_layers = m.num_layers - m.num_moe_layers + m.mtp_modules
    per_dense = attention_params(m) + ffn_params(m, m.intermediate_size)
    matrix = dense_layers * per_dense
    if m.moe is not None:
        e = m.moe
        per_moe = attention_params(m) + ffn_params(m, e.expert_intermediate_size) * (e.num_experts + e.shared_experts)
        matrix += m.num_moe_layers * per_moe
    router = 0.0 if m.moe is None else m.num_moe_layers * m.hidden_size * m.moe.num_experts
    embed = 2 * m.vocab_size * m.hidden_size
    norms = (2 * (m.num_layers + m.mtp_modules) + 1) * m.hidden_size
    return matrix * wb + (router + embed + norms) * 2.0


def kv_bytes_per_token(m: ModelSpec, kv_dtype: str, tp: int = 1) -> float:
    """KV-cache bytes per token per device: GQA shards KV heads over TP (at least one head per device); MLA's
    latent vector (kv_lora_rank + rope dims) is not split by heads, so each TP rank holds all of it."""
    kb = check_dtype(kv_dtype)["act_bytes"] if kv_dtype != "fp8" else 1.0
    if m.attention_kind == "mla":
        return m.num_layers * (m.kv_lora_rank + m.qk_rope_head_dim) * kb
    kv_heads = max(1.0, m.num_kv_heads / tp)
    return m.num_layers * 2 * kv_heads * m.head_dim * kb


@dataclass(frozen=True)
class MemoryPlan:
    """How an instance's memory is split; all per instance (tp devices) except `kv_bytes_per_token`."""

    device_bytes: float
    usable_bytes: float
    weight_bytes: float
    activation_reserve_bytes: float
    kv_capacity_bytes: float
    kv_bytes_per_token: float  # summed over the instance's devices
    block_size_tokens: int
    num_blocks: int

    @property
    def fits(self) -> bool:
        return self.num_blocks > 0


def plan_memory(m: ModelSpec, hw: HardwareSpec, *, tp: int, weights_dtype: str, kv_dtype: str,
                block_size_tokens: int, gpu_memory_utilization: float, token_budget: int,
                fixed_reserve_bytes: float) -> MemoryPlan:
    """Split the instance's memory. The activation reserve is the peak of one forward over `token_budget`
    tokens (hidden states, QKV, MLP intermediate and the sampled rows' logits, in bf16, per device) plus a fixed
    per-device reserve for the runtime (CUDA context, communication buffers, graphs)."""
    device = tp * hw.memory_bytes
    usable = device * gpu_memory_utilization
    weights = weight_bytes(m, weights_dtype)
    inter = m.intermediate_size if m.moe is None else max(m.intermediate_size, m.moe.expert_intermediate_size * m.moe.top_k)
    act_per_device = token_budget * (4 * m.hidden_size + 2 * inter / tp + (m.num_heads * m.head_dim * 3) / tp) * 2.0
    reserve = tp * (act_per_device + fixed_reserve_bytes)
    kv_tok = kv_bytes_per_token(m, kv_dtype, tp) * tp
    capacity = max(0.0, usable - weights - reserve)
    blocks = int(capacity // (kv_tok * block_size_tokens))
    return MemoryPlan(device, usable, weights, reserve, capacity, kv_tok, block_size_tokens, blocks)
