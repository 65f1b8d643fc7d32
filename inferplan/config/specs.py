"""Hardware and model specifications as records: what calibration times and the simulator prices and sizes.

Loaded from `conf/hardware/*.yaml` and `conf/model/*.yaml` (or a Hugging Face `config.json`) by
`inferplan/specs.py`; shared by calibration (peaks for rooflines, shapes to time) and simulation (pricing, memory).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HardwareSpec:
    """One accelerator (or CPU socket group): datasheet peaks, memory, links, power and price."""

    name: str
    kind: str  # gpu | cpu | npu | fpga
    memory_bytes: float
    mem_bandwidth_bytes_per_s: float
    peak_flops_per_s: dict[str, float]  # by compute format: bf16, fp8, int8, fp32 (a str -> number table)
    devices_per_node: int
    intra_node_bandwidth_bytes_per_s: float
    intra_node_latency_s: float
    inter_node_bandwidth_bytes_per_s: float
    inter_node_latency_s: float
    host_link_bandwidth_bytes_per_s: float
    power_w: float
    idle_power_w: float
    usd_per_hour: float
    source: str = ""

    def peak_for(self, compute_format: str) -> float:
        """Peak FLOP/s for a compute format (`calibrate.ops.DTYPES[...]["compute"]`: fp4 for nvfp4 and mxfp4, fp8
        for fp8, fp8_block and mxfp4_a8); formats the device lacks fall back to bf16 (fp8 on A100, fp4 on Hopper)."""
        return self.peak_flops_per_s.get(compute_format) or self.peak_flops_per_s["bf16"]


@dataclass(frozen=True)
class MoESpec:
    num_experts: int
    top_k: int
    expert_intermediate_size: int
    shared_experts: int = 0


@dataclass(frozen=True)
class ModelSpec:
    """Transformer shapes: what an iteration computes and how much memory weights and KV take."""

    name: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    attention_kind: str  # gqa | mla
    num_heads: int
    num_kv_heads: int  # gqa; for mla the latent cache is shared by all heads (1)
    head_dim: int  # gqa head dim; for mla qk_nope + qk_rope
    intermediate_size: int
    ffn_kind: str = "gated"  # gated (SwiGLU: 3 matrices) | plain (2 matrices)
    first_dense_layers: int = 0
    moe: MoESpec | None = None
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    mtp_modules: int = 0
    max_context_tokens: int = 8192
    # Sliding-window attention: the layers (0-based indices) whose queries attend only the last
    # `sliding_window_tokens` positions (themselves included); every other layer attends the whole context.
    sliding_window_tokens: int = 0
    sliding_window_layers: tuple[int, ...] = ()
    # One learned logit per head added to every softmax's denominator (gpt-oss): no key, value or KV cache.
    attention_sinks: bool = False
    source: str = ""

    @property
    def num_moe_layers(self) -> int:
        return 0 if self.moe is None else self.num_layers - self.first_dense_layers

    @property
    def sliding_layer_share(self) -> float:
        """The share of layers whose attention is windowed (0 without a sliding window)."""
        return len(self.sliding_window_layers) / self.num_layers if self.sliding_window_tokens else 0.0
