"""FP8 GEMM with fine-grained block scales (the DeepSeek-V3 / DeepGEMM format): C = A @ B^T in bf16.

A[M, K] is e4m3 with one fp32 scale per 1x128 group of each row, B[N, K] (the nn.Linear weight layout) is e4m3
with one fp32 scale per 128x128 block (see `kernels.quant`, format `fp8_block128`).

Design: one program per BLOCK_M x BLOCK_N tile of C, grouped along M (`GROUP_M`) so that programs running together
share B tiles in L2 (Triton tutorial 03). The K loop steps exactly one scale group (BLOCK_K = 128) at a time: the fp8
x fp8 product of a step goes to the tensor cores with fp32 accumulation, and is then multiplied by the A row scales
and the B block scale before it joins the fp32 accumulator. Promoting every 128-wide partial sum this way is what
keeps FP8 accurate over long K (DeepSeek-V3 report, sec. 3.3.2). B is read K-contiguous, the layout Hopper's fp8
tensor cores need ("NT"), so no transpose is materialised.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.common import (FP8_DTYPE, check_out, check_same_device, check_shape, check_tensor, interpreting,
                            next_pow2)
from kernels.quant import FP8_GROUP, dequantize_fp8_block128_act, dequantize_fp8_block128_weight


@triton.jit
def _gemm_fp8_block_kernel(
    # Pointers to matrices: A[M, K] e4m3, A scales [M, ceil(K/128)], B[N, K] e4m3, B scales
    # [ceil(N/128), ceil(K/128)], C[M, N] bf16
    a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr,
    # Matrix dimensions; M_BUCKET (next power of two of M) is only the autotune key
    M, N, K, M_BUCKET,
    # Strides, in elements
    stride_am, stride_ak, stride_asm, stride_ask,
    stride_bn, stride_bk, stride_bsn, stride_bsk,
    stride_cm, stride_cn,
    # Meta-parameters
    SCALE_GROUP: tl.constexpr,  # 128: the K width of one scale group and the N height of one B block
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,  # tiles of M per L2 group
    DOT_FP32: tl.constexpr,  # interpreter only: upcast dot operands to fp32
):
    tl.static_assert(BLOCK_K == SCALE_GROUP, "one K step must be exactly one scale group")
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak  # [BLOCK_M, BLOCK_K]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn  # [BLOCK_K, BLOCK_N], K-major
    a_scale_ptrs = a_scale_ptr + offs_m * stride_asm  # [BLOCK_M]
    b_scale_ptrs = b_scale_ptr + (offs_n // SCALE_GROUP) * stride_bsn  # [BLOCK_N]

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        mask_k = offs_k < K - kb * BLOCK_K
        a = tl.load(a_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        a_scale = tl.load(a_scale_ptrs + kb * stride_ask, mask=mask_m, other=0.0)
        b_scale = tl.load(b_scale_ptrs + kb * stride_bsk, mask=mask_n, other=0.0)
        if DOT_FP32:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc += tl.dot(a, b) * a_scale[:, None] * b_scale[None, :]
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=mask_m[:, None] & mask_n[None, :])


_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=w, num_stages=s)
    for bm in (16, 64, 128) for bn in (64, 128, 256) for w in (4, 8) for s in (3, 4)
]


def _keep(conf: triton.Config) -> bool:
    """Six Hopper configs (few, so that a full benchmark's compiles and tuning fit in minutes): one warpgroup
    (4 warps) per 64 rows of C, two for 128-row tiles; N tiles of 128, because each step's scaled partial
    product is a second accumulator-sized register tile (64x256 on 4 warps spills, `compile_check` shows);
    3-4 stages (a 128x128 stage is 32 KB of the 227 KB of shared memory); decode tiles (16 rows) take 4 stages."""
    bm, bn, w, s = conf.kwargs["BLOCK_M"], conf.kwargs["BLOCK_N"], conf.num_warps, conf.num_stages
    if bm == 16:
        return bn <= 128 and w == 4 and s == 4
    return bn == 128 and w == (4 if bm == 64 else 8)


def _prune(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
    """Skip tiles taller than the padded M (a 128-row tile for M = 4 wastes 97% of the tensor-core work), and
    16-row tiles once M is large."""
    m = named_args["M_BUCKET"]
    kept = [c for c in configs if c.kwargs["BLOCK_M"] <= max(16, m) and (m <= 64 or c.kwargs["BLOCK_M"] > 16)]
    return kept or configs[:1]


# key: M_BUCKET (M rounded up to a power of two, so serving batch sizes reuse a tuning), N, K.
_gemm_fp8_block_tuned = triton.autotune(configs=[c for c in _CONFIGS if _keep(c)], key=["M_BUCKET", "N", "K"],
                                        prune_configs_by={"early_config_prune": _prune})(_gemm_fp8_block_kernel)
_INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 128, "GROUP_M": 2}


def _check_fp8_block_operands(a_fp8: torch.Tensor, a_scales: torch.Tensor, b_fp8: torch.Tensor,
                              b_scales: torch.Tensor) -> tuple[int, int, int]:
    check_tensor("a_fp8", a_fp8, [FP8_DTYPE], 2)
    check_tensor("b_fp8", b_fp8, [FP8_DTYPE], 2)
    check_tensor("a_scales", a_scales, [torch.float32], 2)
    check_tensor("b_scales", b_scales, [torch.float32], 2)
    m, k = a_fp8.shape
    n, kb = b_fp8.shape
    if kb != k:
        raise ValueError(f"a_fp8 is [M, K] = {tuple(a_fp8.shape)} but b_fp8 is [N, K] = {tuple(b_fp8.shape)}: "
                         "K must match (B is the [N, K] weight, not transposed)")
    groups_k, groups_n = triton.cdiv(k, FP8_GROUP), triton.cdiv(n, FP8_GROUP)
    check_shape("a_scales", a_scales, (m, groups_k), "[M, ceil(K/128)]")
    check_shape("b_scales", b_scales, (groups_n, groups_k), "[ceil(N/128), ceil(K/128)]")
    check_same_device(a_fp8=a_fp8, a_scales=a_scales, b_fp8=b_fp8, b_scales=b_scales)
    return m, n, k


def gemm_fp8_block(a_fp8: torch.Tensor, a_scales: torch.Tensor, b_fp8: torch.Tensor, b_scales: torch.Tensor,
                   out: torch.Tensor | None = None) -> torch.Tensor:
    """C[M, N] bf16 = dequant(A[M, K]) @ dequant(B[N, K])^T, fp32 accumulation; formats as in `quant`.

    a_scales: fp32 [M, ceil(K/128)]; b_scales: fp32 [ceil(N/128), ceil(K/128)]; `out`, if given, must be a
    contiguous bf16 [M, N] tensor.
    """
    m, n, k = _check_fp8_block_operands(a_fp8, a_scales, b_fp8, b_scales)
    c = check_out(out, (m, n), torch.bfloat16, a_fp8.device)
    if m == 0 or n == 0:
        return c
    args = (a_fp8, a_scales, b_fp8, b_scales, c, m, n, k, next_pow2(m),
            a_fp8.stride(0), a_fp8.stride(1), a_scales.stride(0), a_scales.stride(1),
            b_fp8.stride(0), b_fp8.stride(1), b_scales.stride(0), b_scales.stride(1),
            c.stride(0), c.stride(1))
    if interpreting():
        meta = _INTERPRETER_CONFIG
        grid = (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
        _gemm_fp8_block_kernel[grid](*args, SCALE_GROUP=FP8_GROUP, DOT_FP32=True, **meta)
    else:
        def grid(meta: dict) -> tuple[int]:
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
        _gemm_fp8_block_tuned[grid](*args, SCALE_GROUP=FP8_GROUP, DOT_FP32=False)
    return c


def reference_gemm_fp8_block(a_fp8: torch.Tensor, a_scales: torch.Tensor, b_fp8: torch.Tensor,
                             b_scales: torch.Tensor, compute_dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Plain torch: dequantize both operands in `compute_dtype` and multiply; returns [M, N] in `compute_dtype`."""
    a = dequantize_fp8_block128_act(a_fp8, a_scales, compute_dtype)
    b = dequantize_fp8_block128_weight(b_fp8, b_scales, compute_dtype)
    return a @ b.t()
