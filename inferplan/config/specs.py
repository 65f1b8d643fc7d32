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
class LinearAttentionSpec:
    """Gated DeltaNet layers (Qwen3-Next, Qwen3.5): linear attention whose per-sequence memory is a fixed-size state
    instead of a KV cache growing with the context. Each layer projects the hidden state to queries and keys
    (`num_key_heads` x `key_head_dim` each), values and an output gate (`num_value_heads` x `value_head_dim` each)
    and two per-value-head gates (decay and write strength), runs a causal depthwise convolution of
    `conv_kernel_tokens` taps over the query, key and value channels, and updates per value head a
    `key_head_dim` x `value_head_dim` state with the delta rule. The state kept between steps: that recurrent
    state in `state_dtype` and the convolution's last `conv_kernel_tokens - 1` inputs in `conv_dtype`."""

    layers: tuple[int, ...]  # 0-based indices of the linear-attention layers
    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel_tokens: int
    state_dtype: str = "fp32"
    conv_dtype: str = "bf16"

    @property
    def conv_channels(self) -> int:
        """Channels the causal convolution runs over: queries, keys and values."""
        return 2 * self.num_key_heads * self.key_head_dim + self.num_value_heads * self.value_head_dim


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
    # RMSNorm of the queries and of the keys over all heads of a layer at once (MiniMax-M2: `qk_norm_type:
    # per_layer`), not per head: with heads split over TP ranks each layer all-reduces the partial sums of squares.
    qk_norm_across_heads: bool = False
    # A sigmoid gate on each full-attention head's output (Qwen3.5 `attn_output_gate`): the query projection is
    # twice as wide (queries and gates).
    attention_output_gate: bool = False
    # Linear-attention layers (Gated DeltaNet); every other layer is the softmax attention above.
    linear_attention: LinearAttentionSpec | None = None
    source: str = ""

    @property
    def num_moe_layers(self) -> int:
        return 0 if self.moe is None else self.num_layers - self.first_dense_layers

    @property
    def sliding_layer_share(self) -> float:
        """The share of layers whose attention is windowed (0 without a sliding window)."""
        return len(self.sliding_window_layers) / self.num_layers if self.sliding_window_tokens else 0.0

    @property
    def linear_layer_share(self) -> float:
        """The share of layers that are linear attention (0 without any)."""
        return len(self.linear_attention.layers) / self.num_layers if self.linear_attention is not None else 0.0
