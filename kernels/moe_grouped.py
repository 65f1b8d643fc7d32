"""MoE grouped GEMM: out[T, N] = x_sorted[T, K] @ w[e(t), N, K]^T, rows sorted by expert; bf16 or FP8-block.

Routing comes first: `sort_tokens_by_expert` turns top-k expert ids [num_tokens, top_k] (256 routed experts and
top-8 in DeepSeek-V3) into a gather order and per-expert offsets [E+1]; row r of x_sorted belongs to expert e when
expert_offsets[e] <= r < expert_offsets[e+1]. Empty experts have equal offsets.

Design: the M dimension is a list of tiles, each BLOCK_M rows of one expert's segment. The tile table (tile ->
expert, first row) is built on the device with a few torch ops from the offsets, sized by the static bound
cdiv(T, BLOCK_M) + E, so there is no host sync: padding tiles past the real count exit at once. One program computes
a BLOCK_M x BLOCK_N output tile with a K loop like the dense GEMMs; rows outside the expert's segment are masked,
so uneven loads cost at most one partly filled tile per expert, and experts without tokens read no weights. BLOCK_M
follows the mean load (16 rows at decode, where each expert sees a few tokens, up to 128 in prefill). The FP8
variant uses the `fp8_block128` format per expert and promotes each 128-wide partial sum with its scales.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.common import FP8_DTYPE, check_out, check_same_device, check_shape, check_tensor, interpreting
from kernels.quant import FP8_GROUP, dequantize_fp8_block128_act, dequantize_fp8_block128_weight


@triton.jit
def _moe_grouped_kernel(
    # Pointers: x_sorted [T, K], w [E, N, K], out [T, N] bf16; fp8 scales x [T, ceil(K/128)] and
    # w [E, ceil(N/128), ceil(K/128)] (unused unless FP8)
    x_ptr, w_ptr, out_ptr, x_scale_ptr, w_scale_ptr,
    # Tile table: expert id (E for padding tiles) and first row of each M tile; expert offsets [E+1]
    tile_expert_ptr, tile_row_ptr, expert_offsets_ptr,
    # Dimensions
    N, K, E,
    # Strides, in elements
    stride_xt, stride_xk, stride_we, stride_wn, stride_wk, stride_ot, stride_on,
    stride_xst, stride_xsk, stride_wse, stride_wsn, stride_wsk,
    # Meta-parameters
    FP8: tl.constexpr,  # e4m3 operands with fp8_block128 scales, else bf16 operands
    SCALE_GROUP: tl.constexpr,  # 128
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    DOT_FP32: tl.constexpr,  # interpreter only: upcast dot operands to fp32
):
    pid_tile = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(tile_expert_ptr + pid_tile)
    if expert >= E:  # padding tile past the real tile count
        return
    row_start = tl.load(tile_row_ptr + pid_tile)
    row_end = tl.load(expert_offsets_ptr + expert + 1)

    offs_m = row_start + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < row_end
    mask_n = offs_n < N
    x_ptrs = x_ptr + offs_m[:, None] * stride_xt + offs_k[None, :] * stride_xk  # [BLOCK_M, BLOCK_K]
    w_ptrs = (w_ptr + expert.to(tl.int64) * stride_we
              + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn)  # [BLOCK_K, BLOCK_N], K-major
    x_scale_ptrs = x_scale_ptr + offs_m * stride_xst
    w_scale_ptrs = w_scale_ptr + expert * stride_wse + (offs_n // SCALE_GROUP) * stride_wsn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        mask_k = offs_k < K - kb * BLOCK_K
        x = tl.load(x_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        if DOT_FP32:
            x = x.to(tl.float32)
            w = w.to(tl.float32)
        if FP8:
            x_scale = tl.load(x_scale_ptrs + kb * stride_xsk, mask=mask_m, other=0.0)
            w_scale = tl.load(w_scale_ptrs + kb * stride_wsk, mask=mask_n, other=0.0)
            acc += tl.dot(x, w) * x_scale[:, None] * w_scale[None, :]
        else:
            acc = tl.dot(x, w, acc)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    out_ptrs = out_ptr + offs_m[:, None] * stride_ot + offs_n[None, :] * stride_on
    tl.store(out_ptrs, acc.to(tl.bfloat16), mask=mask_m[:, None] & mask_n[None, :])


_CONFIGS = [
    triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
    for bn in (64, 128, 256) for bk in (64, 128) for w in (4, 8) for s in (3, 4)
]


def _keep_bf16(conf: triton.Config) -> bool:
    """bf16: 64-deep K steps (128 bytes per row), N tiles of 64-128 (expert N is 2048-7168 in DeepSeek-V3, so wider
    tiles leave SMs idle at decode), 4 warps at 4 stages or 8 warps at 3."""
    bn, bk, w, s = conf.kwargs["BLOCK_N"], conf.kwargs["BLOCK_K"], conf.num_warps, conf.num_stages
    return bk == 64 and bn <= 128 and (w, s) in ((4, 4), (8, 3))


def _keep_fp8(conf: triton.Config) -> bool:
    """fp8: K steps are one 128-wide scale group; N tiles of 64-256 on 4 or 8 warps at 3 stages."""
    bn, bk, s = conf.kwargs["BLOCK_N"], conf.kwargs["BLOCK_K"], conf.num_stages
    return bk == 128 and s == 3 and not (bn == 256 and conf.num_warps == 4)


def _prune(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
    """Drop tiles whose accumulators overflow the registers at the wrapper's BLOCK_M: fp32 accumulator elements per
    thread <= 128 for bf16, <= 64 for fp8 (each step's scaled product is a second accumulator-sized tile)."""
    per_thread = 64 if kwargs.get("FP8") else 128
    kept = [c for c in configs
            if kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] <= per_thread * 32 * c.num_warps]
    return kept or configs[:1]


# key: N, K and BLOCK_M (chosen by the wrapper from the mean rows per expert), plus the dtypes (autotune adds them).
_moe_bf16_tuned = triton.autotune(configs=[c for c in _CONFIGS if _keep_bf16(c)], key=["N", "K", "BLOCK_M"],
                                  prune_configs_by={"early_config_prune": _prune})(_moe_grouped_kernel)
_moe_fp8_tuned = triton.autotune(configs=[c for c in _CONFIGS if _keep_fp8(c)], key=["N", "K", "BLOCK_M"],
                                 prune_configs_by={"early_config_prune": _prune})(_moe_grouped_kernel)


def sort_tokens_by_expert(topk_ids: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """topk_ids[num_tokens, top_k] int -> (token_index[T], sorted_slot[T], expert_offsets[E+1] int32), T = tokens*k.

    x_sorted = x[token_index] is the grouped GEMM's input; sorted_slot is each sorted row's position in the
    flattened [num_tokens * top_k] routing (for the combine step). The sort is stable, so rows of one expert keep
    token order.
    """
    check_tensor("topk_ids", topk_ids, [torch.int32, torch.int64], 2)
    flat = topk_ids.reshape(-1).to(torch.int64)
    if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= num_experts):
        raise ValueError(f"topk_ids must lie in [0, {num_experts}), got [{int(flat.min())}, {int(flat.max())}]")
    sorted_slot = torch.sort(flat, stable=True).indices
    counts = torch.bincount(flat, minlength=num_experts)
    offsets = torch.zeros(num_experts + 1, dtype=torch.int32, device=flat.device)
    offsets[1:] = torch.cumsum(counts, 0)
    return sorted_slot // topk_ids.shape[1], sorted_slot, offsets


def _tile_table(expert_offsets: torch.Tensor, num_rows: int, block_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per M tile: (expert id, E for padding tiles; first row). Device-side, sized by cdiv(T, BLOCK_M) + E."""
    num_experts = expert_offsets.numel() - 1
    offsets = expert_offsets.to(torch.int64)
    tiles = (offsets[1:] - offsets[:-1] + block_m - 1) // block_m  # [E]
    ends = torch.cumsum(tiles, 0)  # [E]: tile index one past each expert's last tile
    tile_ids = torch.arange(triton.cdiv(num_rows, block_m) + num_experts, device=offsets.device)
    expert = torch.searchsorted(ends, tile_ids, right=True)  # E for tiles past the end
    safe = expert.clamp(max=num_experts - 1)
    rows = offsets[safe] + (tile_ids - (ends[safe] - tiles[safe])) * block_m
    return expert.to(torch.int32), rows.to(torch.int32)


def _block_m(num_rows: int, num_experts: int) -> int:
    mean_rows = num_rows / max(num_experts, 1)
    return 16 if interpreting() or mean_rows <= 16 else 64 if mean_rows <= 96 else 128


def _launch(x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor, out: torch.Tensor | None,
            x_scales: torch.Tensor | None, w_scales: torch.Tensor | None) -> torch.Tensor:
    t, k = x.shape
    e, n, _ = w.shape
    check_tensor("expert_offsets", offsets, [torch.int32, torch.int64], 1)
    check_shape("expert_offsets", offsets, (e + 1,), "[E+1] for w [E, N, K]")
    device = check_same_device(x=x, w=w, expert_offsets=offsets, x_scales=x_scales, w_scales=w_scales)
    y = check_out(out, (t, n), torch.bfloat16, device)
    if t == 0 or n == 0:
        return y
    fp8 = x_scales is not None
    block_m = _block_m(t, e)
    tile_expert, tile_row = _tile_table(offsets, t, block_m)
    xs = x_scales if fp8 else x
    ws = w_scales if fp8 else w
    args = (x, w, y, xs, ws, tile_expert, tile_row, offsets, n, k, e,
            x.stride(0), x.stride(1), w.stride(0), w.stride(1), w.stride(2), y.stride(0), y.stride(1),
            xs.stride(0), xs.stride(1), ws.stride(0), ws.stride(1), ws.stride(-1))
    consts = {"FP8": fp8, "SCALE_GROUP": FP8_GROUP, "BLOCK_M": block_m}
    if interpreting():
        meta = {"BLOCK_N": 32, "BLOCK_K": 128 if fp8 else 32}
        grid = (tile_expert.numel(), triton.cdiv(n, meta["BLOCK_N"]))
        _moe_grouped_kernel[grid](*args, **consts, DOT_FP32=True, **meta)
    else:
        def grid(meta: dict) -> tuple[int, int]:
            return (tile_expert.numel(), triton.cdiv(n, meta["BLOCK_N"]))
        (_moe_fp8_tuned if fp8 else _moe_bf16_tuned)[grid](*args, **consts, DOT_FP32=False)
    return y


def _check_weights(x: torch.Tensor, w: torch.Tensor) -> None:
    if w.shape[2] != x.shape[1]:
        raise ValueError(f"x_sorted is [T, K] = {tuple(x.shape)} but w is [E, N, K] = {tuple(w.shape)}: K must match")


def moe_grouped_gemm(x_sorted: torch.Tensor, w: torch.Tensor, expert_offsets: torch.Tensor,
                     out: torch.Tensor | None = None) -> torch.Tensor:
    """bf16: out[T, N] = x_sorted[T, K] @ w[e, N, K]^T for the rows of each expert e (fp32 accumulation).

    expert_offsets: int32/int64 [E+1], non-decreasing, from 0 to T (from `sort_tokens_by_expert`).
    """
    check_tensor("x_sorted", x_sorted, [torch.bfloat16], 2)
    check_tensor("w", w, [torch.bfloat16], 3)
    _check_weights(x_sorted, w)
    return _launch(x_sorted, w, expert_offsets, out, None, None)


def moe_grouped_gemm_fp8_block(x_fp8: torch.Tensor, x_scales: torch.Tensor, w_fp8: torch.Tensor,
                               w_scales: torch.Tensor, expert_offsets: torch.Tensor,
                               out: torch.Tensor | None = None) -> torch.Tensor:
    """FP8-block: like `moe_grouped_gemm` with x_sorted e4m3 [T, K] + fp32 scales [T, ceil(K/128)] and
    w e4m3 [E, N, K] + fp32 scales [E, ceil(N/128), ceil(K/128)] (`quant.quantize_fp8_block128_*`)."""
    check_tensor("x_fp8", x_fp8, [FP8_DTYPE], 2)
    check_tensor("w_fp8", w_fp8, [FP8_DTYPE], 3)
    check_tensor("x_scales", x_scales, [torch.float32], 2)
    check_tensor("w_scales", w_scales, [torch.float32], 3)
    _check_weights(x_fp8, w_fp8)
    (t, k), (e, n, _) = x_fp8.shape, w_fp8.shape
    check_shape("x_scales", x_scales, (t, triton.cdiv(k, FP8_GROUP)), "[T, ceil(K/128)]")
    check_shape("w_scales", w_scales, (e, triton.cdiv(n, FP8_GROUP), triton.cdiv(k, FP8_GROUP)),
                "[E, ceil(N/128), ceil(K/128)]")
    return _launch(x_fp8, w_fp8, expert_offsets, out, x_scales, w_scales)


def reference_moe_grouped_gemm(x_sorted: torch.Tensor, w: torch.Tensor, expert_offsets: torch.Tensor,
                               x_scales: torch.Tensor | None = None, w_scales: torch.Tensor | None = None,
                               compute_dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Plain torch, one matmul per non-empty expert, each expert's weights dequantized (when scales are given) in
    `compute_dtype` only when used; [T, N] in `compute_dtype`."""
    fp8 = x_scales is not None
    x = dequantize_fp8_block128_act(x_sorted, x_scales, compute_dtype) if fp8 else x_sorted.to(compute_dtype)
    out = x.new_zeros(x.shape[0], w.shape[1])
    bounds = expert_offsets.tolist()
    for e in range(w.shape[0]):
        lo, hi = bounds[e], bounds[e + 1]
        if hi > lo:
            w_e = dequantize_fp8_block128_weight(w[e], w_scales[e], compute_dtype) if fp8 else w[e].to(compute_dtype)
            out[lo:hi] = x[lo:hi] @ w_e.t()
    return out
