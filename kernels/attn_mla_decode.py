"""DeepSeek multi-head latent attention (MLA) decode with absorbed weights, over a paged or contiguous latent cache.

With W_UK absorbed into the query and W_UV into the output projection, every head attends to one shared latent
per token: 512 dims of compressed KV (kv_lora_rank) plus 64 dims of decoupled RoPE key. Layout (as FlashMLA):
q [B, H, 512 + 64] (H = 128 query heads in DeepSeek-V3), latent cache [num_blocks, block_size, 512 + 64] with a
block table [B, max_blocks] (or a contiguous cache [B, max_len, 576] with no table); out [B, H, 512]. Scores are
q . latent over all 576 dims; values are the first 512 dims of the same latent.

Design: decode MLA is bound by reading the latent cache, and all H heads share it, so a program serves a block of
BLOCK_H heads (up to 64) against one split of one sequence's context: each latent tile [BLOCK_N, 576] is loaded
once and used twice, as K (scores = q_nope c^T + q_rope r^T) and as V (acc += p c), with the online softmax of the
other attention kernels. Split-KV with the shared `combine_splits` keeps the GPU busy at small batch. Tiles gather
their rows through the block table, like `attn_paged_decode`.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.attn_paged_decode import choose_num_splits, combine_splits
from kernels.common import check_out, check_same_device, check_tensor, interpreting, next_pow2, scratch

_LOG2E = 1.4426950408889634
DEEPSEEK_V3_SM_SCALE = 192 ** -0.5
"""1/sqrt(qk_nope_head_dim + qk_rope_head_dim) = 1/sqrt(128 + 64), before DeepSeek-V3's YaRN mscale factor."""


@triton.jit
def _mla_decode_kernel(
    # Pointers: q [B, H, RANK + ROPE]; latent cache [num_blocks, block_size, RANK + ROPE]; block_table
    # [B, max_blocks]; context_lens [B]; out [B, H, RANK], or with SPLIT_KV fp32 partials [B, H, num_splits, RANK]
    # and log2-sum-exp [B, H, num_splits]
    q_ptr, cache_ptr, block_table_ptr, context_lens_ptr, out_ptr, lse_ptr,
    # Strides, in elements (the latent dim is contiguous)
    stride_qb, stride_qh, stride_cb, stride_cs, stride_tb, stride_ob, stride_oh, stride_os, stride_lb, stride_lh,
    # Problem: query heads, softmax scale * log2(e), context slices per sequence
    NUM_HEADS, qk_scale, num_splits,
    # Meta-parameters
    RANK: tl.constexpr, ROPE: tl.constexpr,  # 512 and 64 in DeepSeek-V3
    PAGE_SIZE: tl.constexpr,
    SPLIT_KV: tl.constexpr,  # num_splits > 1: write fp32 partials and their log-sum-exp
    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
    DOT_FP32: tl.constexpr,  # interpreter only: upcast dot operands to fp32
):
    seq = tl.program_id(0)
    head_block = tl.program_id(1)
    split = tl.program_id(2)
    ctx = tl.load(context_lens_ptr + seq)
    tokens_per_split = tl.cdiv(tl.cdiv(ctx, num_splits), BLOCK_N) * BLOCK_N
    start = split * tokens_per_split
    end = tl.minimum(start + tokens_per_split, ctx)

    heads = head_block * BLOCK_H + tl.arange(0, BLOCK_H)
    mask_h = heads < NUM_HEADS
    offs_r = tl.arange(0, RANK)
    offs_p = tl.arange(0, ROPE)
    offs_n = tl.arange(0, BLOCK_N)
    q_rows = q_ptr + seq * stride_qb + heads[:, None] * stride_qh
    q_nope = tl.load(q_rows + offs_r[None, :], mask=mask_h[:, None], other=0.0)  # [BLOCK_H, RANK]
    q_rope = tl.load(q_rows + RANK + offs_p[None, :], mask=mask_h[:, None], other=0.0)  # [BLOCK_H, ROPE]
    if DOT_FP32:
        q_nope = q_nope.to(tl.float32)
        q_rope = q_rope.to(tl.float32)

    m_i = tl.full((BLOCK_H,), -1.0e30, dtype=tl.float32)
    l_i = tl.zeros((BLOCK_H,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_H, RANK), dtype=tl.float32)
    for t0 in range(start, end, BLOCK_N):
        tokens = t0 + offs_n
        mask_t = tokens < end
        page = tl.load(block_table_ptr + seq * stride_tb + tokens // PAGE_SIZE, mask=mask_t, other=0)
        rows = cache_ptr + page.to(tl.int64) * stride_cb + (tokens % PAGE_SIZE) * stride_cs  # [BLOCK_N]
        latent = tl.load(rows[:, None] + offs_r[None, :], mask=mask_t[:, None], other=0.0)  # [BLOCK_N, RANK]
        rope = tl.load(rows[:, None] + RANK + offs_p[None, :], mask=mask_t[:, None], other=0.0)  # [BLOCK_N, ROPE]
        latent = latent.to(q_nope.dtype)
        rope = rope.to(q_rope.dtype)
        s = tl.dot(q_nope, tl.trans(latent)) + tl.dot(q_rope, tl.trans(rope))  # [BLOCK_H, BLOCK_N]
        s = tl.where(mask_t[None, :], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(latent.dtype), latent)
        m_i = m_new

    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    o_ptrs = out_ptr + seq * stride_ob + heads[:, None] * stride_oh + split * stride_os + offs_r[None, :]
    tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=mask_h[:, None])
    if SPLIT_KV:
        lse = tl.where(l_i > 0.0, m_i + tl.log2(tl.where(l_i > 0.0, l_i, 1.0)), float("-inf"))
        tl.store(lse_ptr + seq * stride_lb + heads * stride_lh + split, lse, mask=mask_h)


_CONFIGS = [triton.Config({"BLOCK_H": bh, "BLOCK_N": bn}, num_warps=w, num_stages=s)
            for bh in (16, 32, 64) for bn in (16, 32, 64) for w in (4, 8) for s in (1, 2, 3)]


def _keep(conf: triton.Config) -> bool:
    """The fp32 accumulator is BLOCK_H x 512 and the query BLOCK_H x 576 stays in registers: 16 heads on 4 warps,
    32 or 64 on 8 (32 on 4 warps and 64 x 64 spill). A latent tile is BLOCK_N x 1152 bytes: 32 tokens at 3
    stages."""
    bh, bn, w, s = conf.kwargs["BLOCK_H"], conf.kwargs["BLOCK_N"], conf.num_warps, conf.num_stages
    return w == (4 if bh == 16 else 8) and bn == 32 and s == 3


# key: NUM_HEADS, num_splits (encodes batch x context; a run-time argument, so no recompile), PAGE_SIZE, RANK, ROPE.
_mla_decode_tuned = triton.autotune(configs=[c for c in _CONFIGS if _keep(c)],
                                    key=["NUM_HEADS", "num_splits", "PAGE_SIZE", "RANK", "ROPE"])(_mla_decode_kernel)


def _as_paged(kv_cache: torch.Tensor, block_table: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """A contiguous cache [B, max_len, D] becomes pages of a size that divides max_len (64, 16 or 1), as a view."""
    if block_table is not None:
        return kv_cache, block_table
    b, max_len, d = kv_cache.shape
    page = next(p for p in (64, 16, 1) if max_len % p == 0)
    pages = kv_cache.reshape(b * (max_len // page), page, d)
    table = torch.arange(b * (max_len // page), dtype=torch.int32, device=kv_cache.device).reshape(b, -1)
    return pages, table


def attn_mla_decode(q: torch.Tensor, kv_cache: torch.Tensor, context_lens: torch.Tensor,
                    block_table: torch.Tensor | None = None, kv_lora_rank: int = 512,
                    sm_scale: float = DEEPSEEK_V3_SM_SCALE, num_splits: int | None = None,
                    out: torch.Tensor | None = None) -> torch.Tensor:
    """o [B, H, kv_lora_rank] = softmax(q latent^T * sm_scale) latent[:, :kv_lora_rank], per sequence.

    q: bf16/fp16 [B, H, kv_lora_rank + rope_dim]; kv_cache: same dtype, paged [num_blocks, block_size, rank + rope]
    with block_table int32 [B, max_blocks], or contiguous [B, max_len, rank + rope] with block_table None;
    context_lens: int32 [B]. kv_lora_rank and rope_dim must be powers of two (512 and 64 in DeepSeek-V3).
    """
    check_tensor("q", q, [torch.bfloat16, torch.float16], 3)
    check_tensor("kv_cache", kv_cache, [q.dtype], 3)
    check_tensor("context_lens", context_lens, [torch.int32], 1)
    if block_table is not None:
        check_tensor("block_table", block_table, [torch.int32], 2)
    b, h, dq = q.shape
    rope = dq - kv_lora_rank
    if kv_lora_rank < 16 or rope < 16 or next_pow2(kv_lora_rank) != kv_lora_rank or next_pow2(rope) != rope:
        raise ValueError(f"q's last dim must be kv_lora_rank + rope_dim, both powers of two >= 16; got {dq} with "
                         f"kv_lora_rank={kv_lora_rank}")
    if kv_cache.shape[-1] != dq:
        raise ValueError(f"kv_cache's last dim must equal q's ({dq} = kv_lora_rank + rope_dim), "
                         f"got {kv_cache.shape[-1]}")
    if context_lens.shape[0] != b or (block_table is None and kv_cache.shape[0] != b) or (
            block_table is not None and block_table.shape[0] != b):
        raise ValueError(f"context_lens [B], block_table [B, max_blocks] or a contiguous cache [B, max_len, D] "
                         f"need B = {b}")
    if q.stride(-1) != 1 or kv_cache.stride(-1) != 1:
        raise ValueError("q and kv_cache must be contiguous in their last dim")
    if num_splits is not None and num_splits < 1:
        raise ValueError(f"num_splits must be >= 1, got {num_splits}")
    device = check_same_device(q=q, kv_cache=kv_cache, context_lens=context_lens, block_table=block_table)
    o = check_out(out, (b, h, kv_lora_rank), q.dtype, device)
    if b == 0:
        return o
    cache, table = _as_paged(kv_cache, block_table)
    page_size = cache.shape[1]
    splits = num_splits or choose_num_splits(b * triton.cdiv(h, 64), table.shape[1] * page_size, device)
    if splits == 1:
        target, lse, stride_os, stride_lb, stride_lh = o, o, 0, 0, 0
    else:
        target = scratch((b, h, splits, kv_lora_rank), torch.float32, device)
        lse = scratch((b, h, splits), torch.float32, device)
        stride_os, stride_lb, stride_lh = target.stride(2), lse.stride(0), lse.stride(1)
    args = (q, cache, table, context_lens, target, lse,
            q.stride(0), q.stride(1), cache.stride(0), cache.stride(1), table.stride(0),
            target.stride(0), target.stride(1), stride_os, stride_lb, stride_lh, h, sm_scale * _LOG2E, splits)
    consts = {"RANK": kv_lora_rank, "ROPE": rope, "PAGE_SIZE": page_size, "SPLIT_KV": splits > 1}
    if interpreting():
        meta = {"BLOCK_H": 16, "BLOCK_N": 16}
        _mla_decode_kernel[(b, triton.cdiv(h, 16), splits)](*args, **consts, DOT_FP32=True, **meta)
    else:
        def grid(meta: dict) -> tuple[int, int, int]:
            return (b, triton.cdiv(h, meta["BLOCK_H"]), splits)
        _mla_decode_tuned[grid](*args, **consts, DOT_FP32=False)
    return combine_splits(target, lse, o) if splits > 1 else o


def reference_attn_mla_decode(q: torch.Tensor, kv_cache: torch.Tensor, context_lens: torch.Tensor,
                              block_table: torch.Tensor | None = None, kv_lora_rank: int = 512,
                              sm_scale: float = DEEPSEEK_V3_SM_SCALE,
                              compute_dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Plain torch: gather each sequence's latents, scores over all dims, values = first kv_lora_rank dims;
    [B, H, kv_lora_rank] in `compute_dtype`."""
    b, h, dq = q.shape
    out = torch.zeros(b, h, kv_lora_rank, dtype=compute_dtype, device=q.device)
    for i, ctx in enumerate(context_lens.tolist()):
        if ctx == 0:
            continue
        if block_table is None:
            latent = kv_cache[i, :ctx]
        else:
            page = kv_cache.shape[1]
            latent = kv_cache[block_table[i, : triton.cdiv(ctx, page)].long()].reshape(-1, dq)[:ctx]
        latent = latent.to(compute_dtype)  # [ctx, rank + rope]
        p = torch.softmax((q[i].to(compute_dtype) @ latent.t()) * sm_scale, dim=-1)  # [H, ctx]
        out[i] = p @ latent[:, :kv_lora_rank]
    return out
