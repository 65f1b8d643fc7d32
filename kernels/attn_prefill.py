"""Prefill attention: causal flash attention over a variable-length batch, GQA, with an optional cached prefix.

Layout (packed varlen, as in flash-attn's `varlen` API): q [total_q, Hq, D], k and v [total_k, Hkv, D], sequence b
owning rows cu_seqlens_q[b]:cu_seqlens_q[b+1] of q and cu_seqlens_k[b]:cu_seqlens_k[b+1] of k and v. When a
sequence has more keys than queries, the first len_k - len_q keys are its cached prefix and the causal mask is
bottom-right aligned: query i (at position len_k - len_q + i) sees keys 0 .. len_k - len_q + i. Query head h reads
KV head h // (Hq / Hkv). Head dims 64 and 128.

Design (Triton tutorial 06, forward pass): one program per (BLOCK_M queries, sequence x query head). The K/V loop
keeps the running max and sum of an online softmax in base 2 (sm_scale * log2(e) folded into the scores) and never
writes the score matrix. The key range splits in two stages: tiles that every query of the block may see run
without masks; the few tiles on the causal diagonal (and the ragged end of the sequence) run with the mask. Query
blocks past a short sequence's end exit at once, so the grid can use the longest sequence.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels.common import check_out, check_same_device, check_tensor, interpreting, next_pow2

_LOG2E = 1.4426950408889634


@triton.jit
def _attn_inner(acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt, offs_m, offs_n, offs_d,
                lo, hi, len_k, causal_shift, qk_scale,
                MASKED: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, DOT_FP32: tl.constexpr):
    """Online softmax over key tiles [lo, hi); `causal_shift` = len_k - len_q maps query i to key position."""
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = cols[:, None] < len_k
        k = tl.load(k_base + cols[:, None] * stride_kt + offs_d[None, :], mask=kv_mask, other=0.0)  # [BN, D]
        v = tl.load(v_base + cols[:, None] * stride_vt + offs_d[None, :], mask=kv_mask, other=0.0)  # [BN, D]
        if DOT_FP32:
            s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))
        else:
            s = tl.dot(q, tl.trans(k))
        s = s * qk_scale
        if MASKED:
            visible = cols[None, :] < len_k
            if CAUSAL:
                visible = visible & (cols[None, :] <= offs_m[:, None] + causal_shift)
            s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if DOT_FP32:
            acc = acc * alpha[:, None] + tl.dot(p, v.to(tl.float32))
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_prefill_kernel(
    # Pointers: q / o [total_q, Hq, D], k / v [total_k, Hkv, D], cumulative offsets [B+1] int32
    q_ptr, k_ptr, v_ptr, o_ptr, cu_seqlens_q_ptr, cu_seqlens_k_ptr,
    # Strides, in elements (the head dim is contiguous)
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
    # Problem: query heads, query heads per KV head, softmax scale times log2(e); SEQ_BUCKET is only the
    # autotune key
    NUM_HEADS_Q, GQA_GROUP, qk_scale, SEQ_BUCKET,
    # Meta-parameters
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    DOT_FP32: tl.constexpr,  # interpreter only: upcast dot operands to fp32
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    seq = pid_bh // NUM_HEADS_Q
    head = pid_bh % NUM_HEADS_Q
    q_start = tl.load(cu_seqlens_q_ptr + seq)
    len_q = tl.load(cu_seqlens_q_ptr + seq + 1) - q_start
    if pid_m * BLOCK_M >= len_q:
        return
    k_start = tl.load(cu_seqlens_k_ptr + seq)
    len_k = tl.load(cu_seqlens_k_ptr + seq + 1) - k_start
    causal_shift = len_k - len_q
    kv_head = head // GQA_GROUP

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    mask_m = offs_m < len_q
    q_ptrs = q_ptr + (q_start + offs_m).to(tl.int64)[:, None] * stride_qt + head * stride_qh + offs_d[None, :]
    q = tl.load(q_ptrs, mask=mask_m[:, None], other=0.0)  # [BLOCK_M, HEAD_DIM]
    k_base = k_ptr + k_start.to(tl.int64) * stride_kt + kv_head * stride_kh
    v_base = v_ptr + k_start.to(tl.int64) * stride_vt + kv_head * stride_vh

    m_i = tl.full((BLOCK_M,), -1.0e30, dtype=tl.float32)  # finite: a row with no visible key stays NaN-free
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:
        # keys every row of this block may see: positions <= causal_shift + first row
        hi = tl.minimum(len_k, causal_shift + tl.minimum(pid_m * BLOCK_M + BLOCK_M, len_q))
        lo_masked = tl.maximum(tl.minimum(causal_shift + pid_m * BLOCK_M + 1, hi), 0) // BLOCK_N * BLOCK_N
    else:
        hi = len_k
        lo_masked = len_k // BLOCK_N * BLOCK_N
    acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt, offs_m, offs_n, offs_d,
                                0, lo_masked, len_k, causal_shift, qk_scale,
                                False, CAUSAL, BLOCK_N, DOT_FP32)
    acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt, offs_m, offs_n, offs_d,
                                lo_masked, hi, len_k, causal_shift, qk_scale,
                                True, CAUSAL, BLOCK_N, DOT_FP32)
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    o_ptrs = o_ptr + (q_start + offs_m).to(tl.int64)[:, None] * stride_ot + head * stride_oh + offs_d[None, :]
    tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=mask_m[:, None])


_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
    for bm in (64, 128) for bn in (32, 64, 128) for w in (4, 8) for s in (2, 3, 4)
]


def _keep(conf: triton.Config) -> bool:
    """Tutorial-06 shapes: 128-query blocks on 8 warps with 64- or 128-key tiles, 64-query blocks on 4 warps with
    64-key tiles (64 x 128 spills at head dim 128), 3 stages (128 x 128 at head dim 128 takes 224 of 227 KB)."""
    bm, bn, w, s = conf.kwargs["BLOCK_M"], conf.kwargs["BLOCK_N"], conf.num_warps, conf.num_stages
    return bn >= 64 and w == (8 if bm == 128 else 4) and s == 3 and not (bm == 64 and bn == 128)


# key: SEQ_BUCKET (longest query length, rounded up to a power of two), HEAD_DIM, CAUSAL (as in tutorial 06).
_attn_prefill_tuned = triton.autotune(configs=[c for c in _CONFIGS if _keep(c)],
                                      key=["SEQ_BUCKET", "HEAD_DIM", "CAUSAL"])(_attn_prefill_kernel)


def attn_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                 cu_seqlens_k: torch.Tensor, max_seqlen_q: int | None = None, causal: bool = True,
                 sm_scale: float | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """o [total_q, Hq, D] = softmax(q k^T * sm_scale, causal bottom-right) v per sequence and head; bf16/fp16.

    cu_seqlens_q/k: int32 [B+1] cumulative offsets; causal needs len_k >= len_q per sequence (the keys beyond the
    queries are the cached prefix), not checked on the device. max_seqlen_q sizes the grid; pass it to avoid a
    host sync. sm_scale defaults to 1/sqrt(D).
    """
    check_tensor("q", q, [torch.bfloat16, torch.float16], 3)
    check_tensor("k", k, [q.dtype], 3)
    check_tensor("v", v, [q.dtype], 3)
    check_tensor("cu_seqlens_q", cu_seqlens_q, [torch.int32], 1)
    check_tensor("cu_seqlens_k", cu_seqlens_k, [torch.int32], 1)
    total_q, hq, d = q.shape
    total_k, hkv, dk = k.shape
    if v.shape != k.shape:
        raise ValueError(f"v must have the shape of k {tuple(k.shape)}, got {tuple(v.shape)}")
    if dk != d or d not in (64, 128):
        raise ValueError(f"head dim must be 64 or 128 and match between q and k, got q {d}, k {dk}")
    if hq % hkv:
        raise ValueError(f"query heads ({hq}) must be a multiple of KV heads ({hkv})")
    if cu_seqlens_q.shape != cu_seqlens_k.shape:
        raise ValueError(f"cu_seqlens_q and cu_seqlens_k must both be [B+1], got {tuple(cu_seqlens_q.shape)} and "
                         f"{tuple(cu_seqlens_k.shape)}")
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        raise ValueError("q, k and v must be contiguous in the head dim")
    device = check_same_device(q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    o = check_out(out, (total_q, hq, d), q.dtype, device)
    num_seqs = cu_seqlens_q.numel() - 1
    if max_seqlen_q is None:
        max_seqlen_q = int((cu_seqlens_q[1:] - cu_seqlens_q[:-1]).max()) if num_seqs > 0 else 0
    if num_seqs <= 0 or max_seqlen_q <= 0 or total_q == 0:
        return o
    qk_scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(d)) * _LOG2E
    args = (q, k, v, o, cu_seqlens_q, cu_seqlens_k,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), o.stride(0), o.stride(1),
            hq, hq // hkv, qk_scale, next_pow2(max_seqlen_q))
    if interpreting():
        meta = {"BLOCK_M": 16, "BLOCK_N": 16}
        grid = (triton.cdiv(max_seqlen_q, meta["BLOCK_M"]), num_seqs * hq)
        _attn_prefill_kernel[grid](*args, HEAD_DIM=d, CAUSAL=causal, DOT_FP32=True, **meta)
    else:
        def grid(meta: dict) -> tuple[int, int]:
            return (triton.cdiv(max_seqlen_q, meta["BLOCK_M"]), num_seqs * hq)
        _attn_prefill_tuned[grid](*args, HEAD_DIM=d, CAUSAL=causal, DOT_FP32=False)
    return o


def reference_attn_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                           cu_seqlens_k: torch.Tensor, causal: bool = True, sm_scale: float | None = None,
                           compute_dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Plain torch, one sequence and KV head (with its group of query heads) at a time, so the score matrix stays
    [Hq/Hkv, Lq, Lk]; [total_q, Hq, D] in `compute_dtype`. Rows with no visible key are 0."""
    total_q, hq, d = q.shape
    hkv = k.shape[1]
    group = hq // hkv
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(d)
    out = torch.zeros(total_q, hq, d, dtype=compute_dtype, device=q.device)
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for b in range(len(cq) - 1):
        len_q, len_k = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        rows = torch.arange(len_q, device=q.device)[:, None] + (len_k - len_q)
        hidden = torch.arange(len_k, device=q.device)[None, :] > rows  # [Lq, Lk] causal mask
        for h in range(hkv):
            heads = slice(h * group, (h + 1) * group)
            qs = q[cq[b]:cq[b + 1], heads].to(compute_dtype).transpose(0, 1)  # [G, Lq, D]
            ks = k[ck[b]:ck[b + 1], h].to(compute_dtype)  # [Lk, D]
            vs = v[ck[b]:ck[b + 1], h].to(compute_dtype)
            s = (qs @ ks.t()) * scale  # [G, Lq, Lk]
            if causal:
                s = s.masked_fill(hidden, float("-inf"))
            p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a fully masked row (len_k < len_q) gives 0
            out[cq[b]:cq[b + 1], heads] = (p @ vs).transpose(0, 1)
    return out
