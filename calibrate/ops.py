"""The op vocabulary shared by calibration and simulation, and each op's roofline.

An op is one kernel family at one number format (`dtype`). Its roofline time is
`max(flops / peak_flops[compute format], bytes / memory bandwidth)`: the floor no kernel beats. Calibration
measures how far real kernels sit above that floor; the simulator prices an op as the floor divided by that
efficiency plus a launch overhead. Pure arithmetic, no torch: the simulator imports this module.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

OPS: tuple[str, ...] = (
    "gemm",            # dense linear layer: [M,K] x [K,N]
    "moe_gemm",        # grouped GEMM over experts (tokens sorted by expert)
    "attn_prefill",    # causal flash attention over new tokens (and a cached prefix)
    "attn_decode",     # one query per sequence against a paged KV cache
    "attn_mla_decode", # DeepSeek latent-attention decode (absorbed weights)
    "elementwise",     # norms, rotary, activations, residual adds: memory-bound
    "allreduce",       # tensor-parallel all-reduce (bytes over the intra-/inter-node link)
    "all_to_all",      # expert-parallel dispatch / combine
    "linear_attn",     # Gated DeltaNet: causal convolution and the delta-rule state update (chunked or recurrent)
)

# Number formats of weights/activations. `compute` names the peak used for the roofline.
DTYPES: dict[str, dict] = {
    "fp32": {"weight_bytes": 4.0, "act_bytes": 4.0, "compute": "fp32"},
    "bf16": {"weight_bytes": 2.0, "act_bytes": 2.0, "compute": "bf16"},
    "fp16": {"weight_bytes": 2.0, "act_bytes": 2.0, "compute": "bf16"},
    # DeepSeek-V3 fine-grained FP8: e4m3 values, one fp32 scale per 128x128 weight block and per 1x128
    # activation group (4/16384 and 4/128 bytes per element).
    "fp8_block": {"weight_bytes": 1.0 + 4.0 / 16384, "act_bytes": 1.0 + 4.0 / 128, "compute": "fp8"},
    # Plain FP8 e4m3 with a per-tensor scale (FP8 KV cache).
    "fp8": {"weight_bytes": 1.0, "act_bytes": 1.0, "compute": "fp8"},
    # W8A8 with per-channel / per-token scales (negligible bytes).
    "int8": {"weight_bytes": 1.0, "act_bytes": 1.0, "compute": "int8"},
    # W4A16, group size 128: 0.5 byte per weight plus a bf16 scale (and zero) per 128 weights; compute in bf16.
    "int4_wo": {"weight_bytes": 0.5 + 4.0 / 128, "act_bytes": 2.0, "compute": "bf16"},
    # MXFP4 (OCP microscaling): e2m1 values, one 8-bit power-of-two scale per 32 weights (4.25 bits per weight).
    # Compute format fp4: native on GPUs whose datasheet lists an FP4 peak (Blackwell); elsewhere the peak falls
    # back to bf16 (`HardwareSpec.peak_for`): Hopper runs it weight-only, dequantising to bf16 in the kernel
    # (W4A16). Activations are counted in bf16 (what enters the kernel on Hopper; on Blackwell the kernel
    # quantises them itself).
    "mxfp4": {"weight_bytes": 0.5 + 1.0 / 32, "act_bytes": 2.0, "compute": "fp4"},
    # MXFP4 weights with MXFP8 activations (W4A8): the MXFP4 experts above, their activations quantised on the fly
    # to e4m3 with one 8-bit power-of-two scale per 32 values (8.25 bits), as TensorRT-LLM's and SGLang's
    # Blackwell MXFP4 MoE kernels (FlashInfer / TensorRT-LLM-gen `w4a8_mxfp4_mxfp8`) run them. Compute format fp8:
    # Blackwell's block-scaled MMA takes an e2m1 operand against an e4m3 one in its mixed f8f6f4 kind, at the FP8
    # rate; the doubled FP4 rate needs both operands in FP4 (PTX ISA, tcgen05.mma kinds mxf8f6f4 and mxf4nvf4).
    "mxfp4_a8": {"weight_bytes": 0.5 + 1.0 / 32, "act_bytes": 1.0 + 1.0 / 32, "compute": "fp8"},
    # NVFP4: e2m1 values with one FP8 (E4M3) scale per 16 (4.5 bits per value), weights and activations (W4A4: the
    # GEMM and MoE kernels quantise activations to NVFP4 on the fly) at the FP4 peak. Blackwell only: Hopper has no
    # NVFP4 kernel (the peak would fall back to bf16's; the measured grids have no NVFP4 table there).
    "nvfp4": {"weight_bytes": 0.5 + 1.0 / 16, "act_bytes": 0.5 + 1.0 / 16, "compute": "fp4"},
}


def check_dtype(dtype: str) -> dict:
    """The format table entry of `dtype`; `KeyError` names the valid formats."""
    try:
        return DTYPES[dtype]
    except KeyError:
        raise KeyError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}") from None


def roofline_s(flops: float, bytes_: float, peak_flops_per_s: float, mem_bytes_per_s: float) -> float:
    """Lower bound on an op's time (s): the larger of its compute and its memory time."""
    return max(flops / peak_flops_per_s, bytes_ / mem_bytes_per_s)


def gemm_work(m_tokens: float, n: float, k: float, dtype: str) -> tuple[float, float]:
    """(flops, bytes) of C[M,N] = A[M,K] @ W[K,N]: weights read once, activations in, bf16 out."""
    fmt = check_dtype(dtype)
    flops = 2.0 * m_tokens * n * k
    bytes_ = n * k * fmt["weight_bytes"] + m_tokens * k * fmt["act_bytes"] + m_tokens * n * 2.0
    return flops, bytes_


def moe_gemm_work(tokens_routed: float, active_experts: float, n: float, k: float, dtype: str) -> tuple[float, float]:
    """(flops, bytes) of a grouped GEMM: `tokens_routed` (tokens x top-k) rows spread over `active_experts`
    experts, each expert's [K,N] weight read once."""
    fmt = check_dtype(dtype)
    flops = 2.0 * tokens_routed * n * k
    bytes_ = active_experts * n * k * fmt["weight_bytes"] + tokens_routed * (k * fmt["act_bytes"] + n * 2.0)
    return flops, bytes_


def attn_prefill_work(q_tokens_sq_sum: float, q_ctx_sum: float, q_tokens: float, kv_tokens: float,
                      heads: int, kv_heads: int, head_dim: int, kv_bytes: float = 2.0) -> tuple[float, float]:
    """(flops, bytes) of causal attention for a batch of prefill chunks.

    For a chunk of q new tokens after c cached ones, causal QK^T and PV cost 4*h*d*(q*c + q*(q+1)/2) FLOPs;
    callers pass the batch sums `q_ctx_sum` = sum(q*c) and `q_tokens_sq_sum` = sum(q*(q+1)/2). Bytes: Q and O
    in bf16 once, K and V of every attended token once.
    """
    flops = 4.0 * heads * head_dim * (q_ctx_sum + q_tokens_sq_sum)
    bytes_ = 2.0 * q_tokens * heads * head_dim * 2.0 + 2.0 * kv_tokens * kv_heads * head_dim * kv_bytes
    return flops, bytes_


def attn_decode_work(num_seqs: float, ctx_tokens_sum: Any, heads: int, kv_heads: int, head_dim: int,
                     kv_bytes: float = 2.0) -> tuple[Any, Any]:
    """(flops, bytes) of paged decode attention: each sequence's whole K and V cache read once (arrays when
    `ctx_tokens_sum` is an array of context sums, as over a run of decode steps)."""
    flops = 4.0 * heads * head_dim * ctx_tokens_sum
    bytes_ = 2.0 * ctx_tokens_sum * kv_heads * head_dim * kv_bytes + 2.0 * num_seqs * heads * head_dim * 2.0
    return flops, bytes_


def attn_mla_decode_work(num_seqs: float, ctx_tokens_sum: Any, heads: int, kv_lora_rank: int,
                         rope_dim: int, kv_bytes: float = 2.0) -> tuple[Any, Any]:
    """(flops, bytes) of MLA decode with absorbed weights: scores over (rank + rope) dims, values over rank dims;
    one latent vector of (rank + rope) per token read once and shared by all heads (arrays over an array of
    context sums)."""
    flops = 2.0 * heads * ctx_tokens_sum * (kv_lora_rank + rope_dim) + 2.0 * heads * ctx_tokens_sum * kv_lora_rank
    bytes_ = ctx_tokens_sum * (kv_lora_rank + rope_dim) * kv_bytes + num_seqs * heads * (kv_lora_rank * 2 + rope_dim) * 2.0
    return flops, bytes_


# Gated DeltaNet's chunked prefill (flash-linear-attention's `chunk_gated_delta_rule`, which the engines run) works
# in chunks of this many tokens: within a chunk the delta rule is solved as small dense products.
GDN_CHUNK_TOKENS = 64


def gdn_conv_work(tokens: Any, seqs: Any, channels: float, kernel: float, act_bytes: float = 2.0) -> tuple[Any, Any]:
    """(flops, bytes) of the causal depthwise convolution over `tokens` rows of `channels` (queries, keys, values):
    `kernel` multiply-adds per output; every input read and output written once, and each of `seqs` sequences'
    last kernel - 1 inputs (the convolution state) read and written."""
    flops = 2.0 * tokens * channels * kernel
    bytes_ = (2.0 * tokens + 2.0 * seqs * (kernel - 1.0)) * channels * act_bytes
    return flops, bytes_


def gdn_chunk_work(tokens: Any, seqs: Any, v_heads: float, k_heads: float, k_dim: float, v_dim: float,
                   state_bytes: float = 4.0) -> tuple[Any, Any]:
    """(flops, bytes) of the chunked gated delta rule over `tokens` new tokens of `seqs` sequences (per device
    heads). Per token and value head: three k_dim x v_dim products with the state (the chunk's keys against it, its
    update, the queries reading it) and the intra-chunk products of a `GDN_CHUNK_TOKENS` chunk (keys with keys and
    queries with keys over k_dim, the result applied to the values over v_dim: about 2 C (k_dim + v_dim)). Bytes:
    queries, keys, values in and outputs out in bf16, two fp32 gates per value head, and each sequence's state read
    and written once."""
    c = GDN_CHUNK_TOKENS
    flops = 2.0 * tokens * v_heads * (3.0 * k_dim * v_dim + 2.0 * c * (k_dim + v_dim))
    bytes_ = (tokens * ((2.0 * k_heads * k_dim + 2.0 * v_heads * v_dim) * 2.0 + 2.0 * v_heads * 4.0)
              + 2.0 * seqs * v_heads * k_dim * v_dim * state_bytes)
    return flops, bytes_


def gdn_recurrent_work(seqs: Any, v_heads: float, k_heads: float, k_dim: float, v_dim: float,
                       state_bytes: float = 4.0) -> tuple[Any, Any]:
    """(flops, bytes) of one decode step of the gated delta rule for `seqs` sequences (one token each): per value
    head the state decayed, read by the key, updated by a rank-one write and read by the query (4 k_dim x v_dim
    multiply-adds); the state read and written once, the token's queries, keys, values and output in bf16."""
    flops = 8.0 * seqs * v_heads * k_dim * v_dim
    token_bytes = (2.0 * k_heads * k_dim + 2.0 * v_heads * v_dim) * 2.0
    bytes_ = seqs * (2.0 * v_heads * k_dim * v_dim * state_bytes + token_bytes)
    return flops, bytes_


def elementwise_work(elements: float, reads_per_element: float = 2.0, writes_per_element: float = 1.0,
                     elem_bytes: float = 2.0) -> tuple[float, float]:
    """(flops, bytes) of a fused elementwise pass (norm, rotary, activation, residual): bandwidth-bound."""
    return 4.0 * elements, (reads_per_element + writes_per_element) * elements * elem_bytes


def allreduce_s(bytes_: float, ranks: int, link_bytes_per_s: float, latency_s: float) -> float:
    """Ring all-reduce time: 2(p-1)/p of the buffer over the slowest link, plus 2(p-1) latency hops."""
    if ranks <= 1:
        return 0.0
    return 2.0 * (ranks - 1) / ranks * bytes_ / link_bytes_per_s + 2.0 * (ranks - 1) * latency_s


def all_to_all_s(bytes_per_rank: float, ranks: int, link_bytes_per_s: float, latency_s: float) -> float:
    """All-to-all time: each rank sends (p-1)/p of its buffer over its link, one latency per phase."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) / ranks * bytes_per_rank / link_bytes_per_s + latency_s


def log_interp(x: float, xs: Sequence[float], ys: Sequence[float]) -> float:
    """Piecewise-linear interpolation of y in log(x), clamped to the end values outside the knots."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    lx = math.log(x)
    lo, hi = 0, len(xs) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if xs[mid] <= x:
            lo = mid
        else:
            hi = mid
    l0, l1 = math.log(xs[lo]), math.log(xs[hi])
    w = (lx - l0) / (l1 - l0) if l1 > l0 else 0.0
    return ys[lo] + w * (ys[hi] - ys[lo])
