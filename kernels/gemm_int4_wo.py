"""W4A16 weight-only INT4 GEMM: Y[M, N] bf16 = X[M, K] bf16 @ dequant(W)^T, groups of `group_size` along K.

Weights in format `int4_wo_g{G}` (`kernels.quant`): packed uint8 [ceil(K/2), N], two 4-bit codes per byte along K;
bf16 scales [ceil(K/G), N]; bf16 zeros [ceil(K/G), N] for the asymmetric variant, or an implicit zero of 8.

Design: at decode (M = 1-16) the kernel is bound by reading 0.5 byte per weight, so the point is to stream W at
full bandwidth with enough programs in flight. One program owns a BLOCK_M x BLOCK_N tile of Y and one of SPLIT_K
slices of K (split-K: with M <= 16 there are only N/BLOCK_N tiles, too few for 132 SMs on narrow layers); slices
write fp32 partials that a final sum reduces. Inside the K loop the packed tile [BLOCK_K/2, BLOCK_N] is read
N-contiguous (coalesced 16-byte loads across N), each byte feeds two rows of K via a shift, and the integer codes
minus the zero point (exact in bf16) go to the tensor cores as the B operand; since a BLOCK_K step never crosses a
group boundary (group_size % BLOCK_K == 0), the group scale multiplies the fp32 partial product once per step
instead of every weight. Any M is correct; large M uses taller tiles and no split.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.common import (check_out, check_same_device, check_shape, check_tensor, interpreting, next_pow2,
                            num_sms, scratch)
from kernels.quant import INT4_SYMMETRIC_ZERO, dequantize_int4_wo


@triton.jit
def _gemm_int4_wo_kernel(
    # Pointers: X[M, K] bf16, packed W [ceil(K/2), N] uint8, scales / zeros [ceil(K/G), N] bf16,
    # Y [M, N] bf16 (SPLIT_K == 1) or fp32 partials [SPLIT_K, M, N]
    x_ptr, w_ptr, scale_ptr, zero_ptr, y_ptr,
    # Matrix dimensions; M_BUCKET (next power of two of M) is only the autotune key
    M, N, K, M_BUCKET,
    # Strides, in elements
    stride_xm, stride_xk, stride_wk, stride_wn, stride_sg, stride_sn, stride_ys, stride_ym, stride_yn,
    # Meta-parameters
    GROUP_SIZE: tl.constexpr,  # K rows per scale group; a multiple of BLOCK_K
    HAS_ZEROS: tl.constexpr,  # asymmetric (zeros tensor) or symmetric (implicit zero SYM_ZERO)
    SYM_ZERO: tl.constexpr,
    SPLIT_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    DOT_FP32: tl.constexpr,  # interpreter only: upcast dot operands to fp32
):
    tl.static_assert(GROUP_SIZE % BLOCK_K == 0, "a K step must not cross a scale group")
    tl.static_assert(BLOCK_K % 2 == 0, "a K step must cover whole bytes")
    pid_mn = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid_mn // num_pid_n
    pid_n = pid_mn % num_pid_n

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    shift = (offs_k % 2) * 4  # [BLOCK_K]: even k in the low nibble, odd k in the high nibble

    num_k_steps = tl.cdiv(K, BLOCK_K)
    steps_per_split = tl.cdiv(num_k_steps, SPLIT_K)
    k_start = pid_k * steps_per_split * BLOCK_K
    k_end = min(K, (pid_k + 1) * steps_per_split * BLOCK_K)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        ks = k0 + offs_k
        mask_k = ks < K
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + ks[None, :] * stride_xk,
                    mask=mask_m[:, None] & mask_k[None, :], other=0.0)  # [BLOCK_M, BLOCK_K]
        packed = tl.load(w_ptr + (ks // 2)[:, None] * stride_wk + offs_n[None, :] * stride_wn,
                         mask=mask_k[:, None] & mask_n[None, :], other=0)  # [BLOCK_K, BLOCK_N], bytes twice
        codes = (packed.to(tl.int32) >> shift[:, None]) & 0xF
        group = k0 // GROUP_SIZE
        scale = tl.load(scale_ptr + group * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)
        if HAS_ZEROS:
            zero = tl.load(zero_ptr + group * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)
            w = codes.to(tl.float32) - zero.to(tl.float32)[None, :]
        else:
            w = (codes - SYM_ZERO).to(tl.float32)
        if DOT_FP32:
            part = tl.dot(x.to(tl.float32), w)
        else:
            part = tl.dot(x, w.to(x.dtype))  # integers in [-15, 15]: exact in bf16
        acc += part * scale.to(tl.float32)[None, :]

    y_ptrs = y_ptr + pid_k * stride_ys + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    mask_y = mask_m[:, None] & mask_n[None, :]
    if SPLIT_K == 1:
        tl.store(y_ptrs, acc.to(tl.bfloat16), mask=mask_y)
    else:
        tl.store(y_ptrs, acc, mask=mask_y)


_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
    for bm in (16, 64, 128) for bn in (32, 64, 128, 256) for bk in (64, 128) for w in (4, 8) for s in (2, 3, 4)
]


def _keep(conf: triton.Config) -> bool:
    """Decode tiles (16 rows): N tiles of 32-128 with 4 stages, to keep many weight loads in flight, 4 warps.
    Prefill tiles: 64x128 on 4 warps and 128x128 on 8, 3 stages."""
    bm, bn, bk = conf.kwargs["BLOCK_M"], conf.kwargs["BLOCK_N"], conf.kwargs["BLOCK_K"]
    w, s = conf.num_warps, conf.num_stages
    if bm == 16:
        return bn in (32, 64, 128) and bk == 128 and w == 4 and s == 4
    if bm == 64:
        return bn == 128 and bk == 64 and w == 4 and s == 3
    return bn == 128 and bk == 64 and w == 8 and s == 3  # 128x256 spills


def _prune(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
    """Decode (M <= 16) keeps only the 16-row tiles, larger M only taller tiles no taller than the padded M;
    K steps must divide the scale group."""
    m, group = named_args["M_BUCKET"], kwargs.get("GROUP_SIZE", 128)
    kept = [c for c in configs if (c.kwargs["BLOCK_M"] == 16) == (m <= 16) and c.kwargs["BLOCK_M"] <= max(16, m)
            and group % c.kwargs["BLOCK_K"] == 0]
    return kept or configs[:1]


# key: M_BUCKET (M rounded up to a power of two), N, K; SPLIT_K is a function of these, chosen by the wrapper.
_gemm_int4_wo_tuned = triton.autotune(configs=[c for c in _CONFIGS if _keep(c)], key=["M_BUCKET", "N", "K"],
                                      prune_configs_by={"early_config_prune": _prune})(_gemm_int4_wo_kernel)
_INTERPRETER_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32}
_DECODE_BLOCK_N = 64  # the N tile the split-K heuristic assumes for M <= 16
_MIN_K_PER_SPLIT = 512  # a split reads at least this many rows of K, so partial sums stay cheap to reduce


def _split_k(m: int, n: int, k: int, device: torch.device) -> int:
    """Enough K slices to give every SM two programs at decode; one slice when M > 16 (tiles fill the GPU)."""
    if m > 16:
        return 1
    tiles = triton.cdiv(n, _DECODE_BLOCK_N)
    wanted = triton.cdiv(2 * num_sms(device), tiles)
    return max(1, min(wanted, k // _MIN_K_PER_SPLIT))


def gemm_int4_wo(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None = None,
                 group_size: int = 128, out: torch.Tensor | None = None, split_k: int | None = None
                 ) -> torch.Tensor:
    """Y[M, N] bf16 = x[M, K] bf16 @ W^T with W[N, K] = (code - zero) * scale (`quant.quantize_int4_wo`).

    packed: uint8 [ceil(K/2), N]; scales: bf16 [ceil(K/group_size), N]; zeros: same shape and dtype, or None for
    the symmetric format (implicit zero 8); group_size: a multiple of 32. `split_k` overrides the heuristic.
    """
    check_tensor("x", x, [torch.bfloat16], 2)
    check_tensor("packed", packed, [torch.uint8], 2)
    check_tensor("scales", scales, [torch.bfloat16], 2)
    if zeros is not None:
        check_tensor("zeros", zeros, [torch.bfloat16], 2)
    if group_size <= 0 or group_size % 32:
        raise ValueError(f"group_size must be a positive multiple of 32, got {group_size}")
    m, k = x.shape
    n = packed.shape[1]
    check_shape("packed", packed, (triton.cdiv(k, 2), n), "[ceil(K/2), N] (two 4-bit codes per byte along K)")
    check_shape("scales", scales, (triton.cdiv(k, group_size), n), "[ceil(K/group_size), N]")
    if zeros is not None:
        check_shape("zeros", zeros, tuple(scales.shape), "[ceil(K/group_size), N] like scales")
    if split_k is not None and split_k < 1:
        raise ValueError(f"split_k must be >= 1, got {split_k}")
    device = check_same_device(x=x, packed=packed, scales=scales, zeros=zeros)
    y = check_out(out, (m, n), torch.bfloat16, device)
    if m == 0 or n == 0:
        return y
    splits = split_k or _split_k(m, n, k, device)
    target = y if splits == 1 else scratch((splits, m, n), torch.float32, device)
    stride_ys = 0 if splits == 1 else target.stride(0)
    args = (x, packed, scales, zeros if zeros is not None else scales, target, m, n, k, next_pow2(m),
            x.stride(0), x.stride(1), packed.stride(0), packed.stride(1), scales.stride(0), scales.stride(1),
            stride_ys, target.stride(-2), target.stride(-1))
    consts = {"GROUP_SIZE": group_size, "HAS_ZEROS": zeros is not None, "SYM_ZERO": INT4_SYMMETRIC_ZERO,
              "SPLIT_K": splits}
    if interpreting():
        meta = _INTERPRETER_CONFIG
        grid = (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), splits)
        _gemm_int4_wo_kernel[grid](*args, **consts, DOT_FP32=True, **meta)
    else:
        def grid(meta: dict) -> tuple[int, int]:
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), splits)
        _gemm_int4_wo_tuned[grid](*args, **consts, DOT_FP32=False)
    if splits > 1:
        y.copy_(target.sum(dim=0))
    return y


def reference_gemm_int4_wo(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor,
                           zeros: torch.Tensor | None = None, group_size: int = 128,
                           compute_dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Plain torch: dequantize W in `compute_dtype` and multiply; returns [M, N] in `compute_dtype`."""
    w = dequantize_int4_wo(packed, scales, zeros, x.shape[1], group_size, compute_dtype)
    return x.to(compute_dtype) @ w.t()
