"""Paged decode attention: one new query per sequence against a paged KV cache (vLLM layout), GQA, bf16 or FP8 KV.

Layout: q [B, Hq, D]; k_cache and v_cache [num_blocks, block_size, Hkv, D] (block_size 16 or 64); block_table
[B, max_blocks] int32 maps a sequence's page i to a cache block; context_lens [B] int32. FP8 caches are e4m3 with
one fp32 scale per tensor (k_scale, v_scale), value = code * scale.

Design (flash-decoding): decode is bound by reading the cache, so every KV byte is read once and the GPU must be
kept busy even at batch 1. One program serves one (sequence, KV head, split): all Hq / Hkv query heads that share
the KV head ride in one tile (padded to 16 rows for the tensor cores), so a KV head is read once, not once per query
head. The context is cut into num_splits slices when B x Hkv programs would leave SMs idle; each slice writes an
fp32 partial output and its log-sum-exp, and `_combine_splits_kernel` merges them. A key tile of BLOCK_N tokens
gathers its rows through the block table (page = token // block_size), so tiles may span pages. FP8 keys and values
are converted to the query dtype in registers; k_scale folds into the softmax scale and v_scale into the output.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels.common import (FP8_DTYPE, check_out, check_same_device, check_tensor, interpreting, next_pow2,
                            num_sms, scratch)

_LOG2E = 1.4426950408889634
_MIN_TOKENS_PER_SPLIT = 256


@triton.jit
def _paged_decode_kernel(
    # Pointers: q [B, Hq, D]; caches [num_blocks, block_size, Hkv, D]; block_table [B, max_blocks];
    # context_lens [B]; out [B, Hq, D], or with SPLIT_KV fp32 partials [B, Hq, num_splits, D] and
    # log2-sum-exp [B, Hq, num_splits]
    q_ptr, k_cache_ptr, v_cache_ptr, block_table_ptr, context_lens_ptr, out_ptr, lse_ptr,
    # Strides, in elements (the head dim is contiguous)
    stride_qb, stride_qh, stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
    stride_tb, stride_ob, stride_oh, stride_os, stride_lb, stride_lh,
    # Scalars: softmax scale * log2(e) * k_scale; v_scale; context slices per sequence
    qk_scale, v_scale, num_splits,
    # Meta-parameters
    GQA_GROUP: tl.constexpr, BLOCK_H: tl.constexpr,  # query heads per KV head, padded to >= 16
    HEAD_DIM: tl.constexpr, PAGE_SIZE: tl.constexpr,
    SPLIT_KV: tl.constexpr,  # num_splits > 1: write fp32 partials and their log-sum-exp
    BLOCK_N: tl.constexpr,
    DOT_FP32: tl.constexpr,  # interpreter only: upcast dot operands to fp32
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    ctx = tl.load(context_lens_ptr + seq)
    tokens_per_split = tl.cdiv(tl.cdiv(ctx, num_splits), BLOCK_N) * BLOCK_N
    start = split * tokens_per_split
    end = tl.minimum(start + tokens_per_split, ctx)

    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    mask_h = offs_h < GQA_GROUP
    heads = kv_head * GQA_GROUP + offs_h
    q = tl.load(q_ptr + seq * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
                mask=mask_h[:, None], other=0.0)  # [BLOCK_H, HEAD_DIM]
    if DOT_FP32:
        q = q.to(tl.float32)

    m_i = tl.full((BLOCK_H,), -1.0e30, dtype=tl.float32)
    l_i = tl.zeros((BLOCK_H,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_H, HEAD_DIM), dtype=tl.float32)
    for t0 in range(start, end, BLOCK_N):
        tokens = t0 + offs_n
        mask_t = tokens < end
        page = tl.load(block_table_ptr + seq * stride_tb + tokens // PAGE_SIZE, mask=mask_t, other=0)
        row = page.to(tl.int64) * stride_kb + (tokens % PAGE_SIZE) * stride_ks + kv_head * stride_kh  # [BLOCK_N]
        k = tl.load(k_cache_ptr + row[:, None] + offs_d[None, :], mask=mask_t[:, None], other=0.0)
        vrow = page.to(tl.int64) * stride_vb + (tokens % PAGE_SIZE) * stride_vs + kv_head * stride_vh
        v = tl.load(v_cache_ptr + vrow[:, None] + offs_d[None, :], mask=mask_t[:, None], other=0.0)
        k = k.to(q.dtype)  # fp8 -> bf16 in registers (a no-op for a bf16 cache)
        v = v.to(q.dtype)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # [BLOCK_H, BLOCK_N]
        s = tl.where(mask_t[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    out = acc * v_scale / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    o_ptrs = out_ptr + seq * stride_ob + heads[:, None] * stride_oh + split * stride_os + offs_d[None, :]
    tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=mask_h[:, None])
    if SPLIT_KV:
        lse = tl.where(l_i > 0.0, m_i + tl.log2(tl.where(l_i > 0.0, l_i, 1.0)), float("-inf"))
        tl.store(lse_ptr + seq * stride_lb + heads * stride_lh + split, lse, mask=mask_h)


@triton.jit
def _combine_splits_kernel(
    # Pointers: fp32 partials [B, H, num_splits, D], log2-sum-exp [B, H, num_splits], out [B, H, D]
    part_ptr, lse_ptr, out_ptr,
    # Strides, in elements (the last dim is contiguous)
    stride_pb, stride_ph, stride_ps, stride_lb, stride_lh, stride_ob, stride_oh,
    # Problem size
    num_splits,
    # Meta-parameters
    SPLITS_P2: tl.constexpr,  # num_splits rounded up to a power of two
    HEAD_DIM: tl.constexpr,
):
    """out = sum_s 2^(lse_s - max) * part_s / sum_s 2^(lse_s - max); empty splits carry lse = -inf."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    offs_s = tl.arange(0, SPLITS_P2)
    offs_d = tl.arange(0, HEAD_DIM)
    mask_s = offs_s < num_splits
    lse = tl.load(lse_ptr + seq * stride_lb + head * stride_lh + offs_s, mask=mask_s, other=float("-inf"))
    lse_max = tl.maximum(tl.max(lse, 0), -1.0e30)  # finite even when every split is empty
    weight = tl.exp2(lse - lse_max)  # [SPLITS_P2]
    part = tl.load(part_ptr + seq * stride_pb + head * stride_ph + offs_s[:, None] * stride_ps + offs_d[None, :],
                   mask=mask_s[:, None], other=0.0)
    total = tl.sum(weight, 0)
    out = tl.sum(part * weight[:, None], 0) / tl.where(total > 0.0, total, 1.0)
    tl.store(out_ptr + seq * stride_ob + head * stride_oh + offs_d, out.to(out_ptr.dtype.element_ty))


def combine_splits(part: torch.Tensor, lse: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Merge split-KV partials (fp32 [B, H, S, D], log2-sum-exp [B, H, S]) into `out` [B, H, D]; returns `out`."""
    b, h, s, d = part.shape
    _combine_splits_kernel[(b, h)](part, lse, out, part.stride(0), part.stride(1), part.stride(2),
                                   lse.stride(0), lse.stride(1), out.stride(0), out.stride(1), s,
                                   SPLITS_P2=next_pow2(s), HEAD_DIM=d)
    return out


def choose_num_splits(num_programs: int, max_context_tokens: int, device: torch.device) -> int:
    """Split-KV slices so that ~2 programs run per SM, each slice at least 256 tokens; 1 when the grid is full."""
    wanted = triton.cdiv(2 * num_sms(device), max(num_programs, 1))
    return max(1, min(wanted, max_context_tokens // _MIN_TOKENS_PER_SPLIT, 64))


_CONFIGS = [triton.Config({"BLOCK_N": bn}, num_warps=w, num_stages=s)
            for bn in (16, 32, 64, 128) for w in (2, 4, 8) for s in (2, 3, 4)]


def _keep(conf: triton.Config) -> bool:
    """Key tiles of 32-128 tokens on 4 warps (128 on 8): each K/V row is 128-256 contiguous bytes, so a tile keeps
    several KB of loads in flight per program; 4 stages for the small tiles, 3 for the large, to overlap the
    gathers with the math."""
    bn, w, s = conf.kwargs["BLOCK_N"], conf.num_warps, conf.num_stages
    return bn >= 32 and w == (8 if bn == 128 else 4) and s == (3 if bn == 128 else 4)


# key: HEAD_DIM, PAGE_SIZE, GQA_GROUP, num_splits (which encodes batch x context), and the dtypes. The split
# count is a run-time argument, so a new batch size re-tunes (timing only) without recompiling.
_paged_decode_tuned = triton.autotune(configs=[c for c in _CONFIGS if _keep(c)],
                                      key=["HEAD_DIM", "PAGE_SIZE", "GQA_GROUP", "num_splits"])(_paged_decode_kernel)


def attn_paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                      context_lens: torch.Tensor, sm_scale: float | None = None, k_scale: float = 1.0,
                      v_scale: float = 1.0, num_splits: int | None = None, out: torch.Tensor | None = None
                      ) -> torch.Tensor:
    """o [B, Hq, D] bf16/fp16 = softmax(q K^T * sm_scale) V over each sequence's context_lens[b] cached tokens.

    k_cache / v_cache: [num_blocks, block_size, Hkv, D] in q's dtype or float8_e4m3fn (then k_scale / v_scale
    dequantize them); block_table: int32 [B, max_blocks]; context_lens: int32 [B], each <= max_blocks * block_size.
    sm_scale defaults to 1/sqrt(D); num_splits overrides the split-KV heuristic.
    """
    check_tensor("q", q, [torch.bfloat16, torch.float16], 3)
    check_tensor("k_cache", k_cache, [q.dtype, FP8_DTYPE], 4)
    check_tensor("v_cache", v_cache, [k_cache.dtype], 4)
    check_tensor("block_table", block_table, [torch.int32], 2)
    check_tensor("context_lens", context_lens, [torch.int32], 1)
    b, hq, d = q.shape
    _, page_size, hkv, dk = k_cache.shape
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"v_cache must have the shape of k_cache {tuple(k_cache.shape)}, got {tuple(v_cache.shape)}")
    if dk != d or d not in (64, 128, 256):
        raise ValueError(f"head dim must be 64, 128 or 256 and match between q and the cache, got {d} and {dk}")
    if page_size not in (16, 32, 64, 128):
        raise ValueError(f"block_size must be 16, 32, 64 or 128, got {page_size}")
    if hq % hkv:
        raise ValueError(f"query heads ({hq}) must be a multiple of KV heads ({hkv})")
    if block_table.shape[0] != b or context_lens.shape[0] != b:
        raise ValueError(f"block_table [B, max_blocks] and context_lens [B] need B = {b}, got "
                         f"{tuple(block_table.shape)} and {tuple(context_lens.shape)}")
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1 or block_table.stride(-1) != 1:
        raise ValueError("q, the caches and block_table must be contiguous in their last dim")
    if num_splits is not None and num_splits < 1:
        raise ValueError(f"num_splits must be >= 1, got {num_splits}")
    device = check_same_device(q=q, k_cache=k_cache, v_cache=v_cache, block_table=block_table,
                               context_lens=context_lens)
    o = check_out(out, (b, hq, d), q.dtype, device)
    if b == 0:
        return o
    group = hq // hkv
    splits = num_splits or choose_num_splits(b * hkv, block_table.shape[1] * page_size, device)
    if splits == 1:
        target, lse = o, o  # lse is unused with one split
        stride_os, stride_lb, stride_lh = 0, 0, 0
    else:
        target = scratch((b, hq, splits, d), torch.float32, device)
        lse = scratch((b, hq, splits), torch.float32, device)
        stride_os, stride_lb, stride_lh = target.stride(2), lse.stride(0), lse.stride(1)
    qk_scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(d)) * _LOG2E * k_scale
    args = (q, k_cache, v_cache, block_table, context_lens, target, lse,
            q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0),
            target.stride(0), target.stride(1), stride_os, stride_lb, stride_lh, qk_scale, v_scale, splits)
    consts = {"GQA_GROUP": group, "BLOCK_H": max(16, next_pow2(group)), "HEAD_DIM": d, "PAGE_SIZE": page_size,
              "SPLIT_KV": splits > 1}
    grid = (b, hkv, splits)
    if interpreting():
        _paged_decode_kernel[grid](*args, **consts, BLOCK_N=16, DOT_FP32=True)
    else:
        _paged_decode_tuned[grid](*args, **consts, DOT_FP32=False)
    return combine_splits(target, lse, o) if splits > 1 else o


def reference_attn_paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                                block_table: torch.Tensor, context_lens: torch.Tensor, sm_scale: float | None = None,
                                k_scale: float = 1.0, v_scale: float = 1.0,
                                compute_dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Plain torch: gather each sequence's pages, dequantize, softmax; [B, Hq, D] in `compute_dtype`."""
    b, hq, d = q.shape
    page_size, hkv = k_cache.shape[1], k_cache.shape[2]
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(d)
    out = torch.zeros(b, hq, d, dtype=compute_dtype, device=q.device)
    for i, ctx in enumerate(context_lens.tolist()):
        if ctx == 0:
            continue
        pages = block_table[i, : triton.cdiv(ctx, page_size)].long()
        k = k_cache[pages].reshape(-1, hkv, d)[:ctx].to(compute_dtype) * k_scale  # [ctx, Hkv, D]
        v = v_cache[pages].reshape(-1, hkv, d)[:ctx].to(compute_dtype) * v_scale
        k = k.repeat_interleave(hq // hkv, 1).transpose(0, 1)  # [Hq, ctx, D]
        v = v.repeat_interleave(hq // hkv, 1).transpose(0, 1)
        s = (q[i].to(compute_dtype)[:, None, :] @ k.transpose(1, 2)) * scale  # [Hq, 1, ctx]
        out[i] = (torch.softmax(s, dim=-1) @ v)[:, 0]
    return out
