"""FLOP and byte counts per kernel: pure Python, no torch or triton, so the calibration can import them anywhere.

FLOPs count one multiply-add as 2. Bytes are the fewest each kernel must move through device memory: every input
read once and every output written once (the roofline's denominator); re-reads a kernel makes on top are its own
inefficiency, not part of the count. Sequence arguments (`seqlens_q`, `context_lens`) are per-sequence lengths.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

BF16_BYTES = 2
FP32_BYTES = 4
INT32_BYTES = 4
FP8_GROUP = 128


def flops_gemm(m: int, n: int, k: int) -> int:
    """C[M, N] = A[M, K] @ B[N, K]^T: 2*M*N*K (the same count for every GEMM format here)."""
    return 2 * m * n * k


def bytes_gemm_bf16(m: int, n: int, k: int) -> int:
    """bf16 A and B in, bf16 C out (the `torch.matmul` baseline)."""
    return BF16_BYTES * (m * k + n * k + m * n)


def bytes_gemm_fp8_block(m: int, n: int, k: int) -> int:
    """e4m3 A and B, fp32 scales per 1x128 (A) and 128x128 (B) block, bf16 C."""
    kb, nb = math.ceil(k / FP8_GROUP), math.ceil(n / FP8_GROUP)
    return m * k + n * k + FP32_BYTES * (m * kb + nb * kb) + BF16_BYTES * m * n


def bytes_gemm_int8(m: int, n: int, k: int) -> int:
    """int8 A and B, fp32 per-token and per-channel scales, bf16 C."""
    return m * k + n * k + FP32_BYTES * (m + n) + BF16_BYTES * m * n


def bytes_gemm_int4_wo(m: int, n: int, k: int, group_size: int = 128, symmetric: bool = True) -> int:
    """bf16 X, 4-bit weights (half a byte each), bf16 scales (and zeros if asymmetric) per group, bf16 out."""
    groups = math.ceil(k / group_size) * n
    meta = BF16_BYTES * groups * (1 if symmetric else 2)
    return BF16_BYTES * m * k + math.ceil(k / 2) * n + meta + BF16_BYTES * m * n


def flops_moe_grouped(num_routed_tokens: int, n: int, k: int) -> int:
    """Sum over experts of 2*tokens_e*N*K = 2*T*N*K with T = tokens * top_k rows of the sorted input."""
    return 2 * num_routed_tokens * n * k


def bytes_moe_grouped_bf16(num_routed_tokens: int, n: int, k: int, num_active_experts: int) -> int:
    """bf16 X_sorted[T, K] and out[T, N], plus the bf16 weights of every expert that received >= 1 token."""
    return BF16_BYTES * (num_routed_tokens * k + num_routed_tokens * n + num_active_experts * n * k)


def bytes_moe_grouped_fp8_block(num_routed_tokens: int, n: int, k: int, num_active_experts: int) -> int:
    """e4m3 X_sorted and active experts' weights with their fp8_block128 scales, bf16 out."""
    kb, nb = math.ceil(k / FP8_GROUP), math.ceil(n / FP8_GROUP)
    x = num_routed_tokens * k + FP32_BYTES * num_routed_tokens * kb
    w = num_active_experts * (n * k + FP32_BYTES * nb * kb)
    return x + w + BF16_BYTES * num_routed_tokens * n


def attended_pairs(seqlen_q: int, seqlen_k: int, causal: bool) -> int:
    """(query, key) pairs one head scores; causal is bottom-right aligned (query i sits at key position
    seqlen_k - seqlen_q + i, as with a cached prefix), so each query sees its prefix and itself."""
    if not causal:
        return seqlen_q * seqlen_k
    prefix = seqlen_k - seqlen_q
    if prefix < 0:  # the first -prefix queries see no key; the rest see 1, 2, ..., seqlen_k keys
        return seqlen_k * (seqlen_k + 1) // 2
    return seqlen_q * prefix + seqlen_q * (seqlen_q + 1) // 2


def flops_attn_prefill(seqlens_q: Sequence[int], seqlens_k: Sequence[int], num_heads_q: int, head_dim: int,
                       causal: bool = True) -> int:
    """QK^T and PV: 4 * head_dim FLOPs per attended (query, key) pair per query head (masked pairs not counted)."""
    pairs = sum(attended_pairs(q, k, causal) for q, k in zip(seqlens_q, seqlens_k, strict=True))
    return 4 * head_dim * num_heads_q * pairs


def bytes_attn_prefill(seqlens_q: Sequence[int], seqlens_k: Sequence[int], num_heads_q: int, num_heads_kv: int,
                       head_dim: int) -> int:
    """bf16 Q and O per query head, bf16 K and V per KV head, each read or written once."""
    return BF16_BYTES * head_dim * (2 * num_heads_q * sum(seqlens_q) + 2 * num_heads_kv * sum(seqlens_k))


def flops_attn_decode(context_lens: Sequence[int], num_heads_q: int, head_dim: int) -> int:
    """One query per sequence: 4 * head_dim FLOPs per (head, cached token)."""
    return 4 * head_dim * num_heads_q * sum(context_lens)


def bytes_attn_paged_decode(context_lens: Sequence[int], num_heads_q: int, num_heads_kv: int, head_dim: int,
                            page_size: int, kv_bytes_per_elem: int = BF16_BYTES) -> int:
    """The K and V cache of every cached token (bf16 = 2, fp8 = 1 byte each), the int32 block-table entries
    used, and bf16 q and out."""
    kv = 2 * kv_bytes_per_elem * num_heads_kv * head_dim * sum(context_lens)
    table = INT32_BYTES * sum(math.ceil(c / page_size) for c in context_lens)
    return kv + table + 2 * BF16_BYTES * len(context_lens) * num_heads_q * head_dim


def flops_attn_mla_decode(context_lens: Sequence[int], num_heads: int, kv_lora_rank: int = 512,
                          rope_dim: int = 64) -> int:
    """Absorbed MLA: scores over rank + rope dims, then PV over the rank dims: 2*(2*rank + rope) per head-token."""
    return 2 * num_heads * (2 * kv_lora_rank + rope_dim) * sum(context_lens)


def bytes_attn_mla_decode(context_lens: Sequence[int], num_heads: int, kv_lora_rank: int = 512,
                          rope_dim: int = 64, page_size: int = 64) -> int:
    """The bf16 latent cache (rank + rope per token, shared by all heads) read once, block-table entries, bf16 q
    [B, H, rank + rope] in and out [B, H, rank]."""
    cache = BF16_BYTES * (kv_lora_rank + rope_dim) * sum(context_lens)
    table = INT32_BYTES * sum(math.ceil(c / page_size) for c in context_lens)
    qo = BF16_BYTES * len(context_lens) * num_heads * (2 * kv_lora_rank + rope_dim)
    return cache + table + qo
