"""W8A8 INT8 GEMM: C[M, N] bf16 = (A_int8 * a_scales[M]) @ (B_int8[N, K] * b_scales[N])^T.

Per-token activation scales and per-output-channel weight scales (format `int8_per_token` / `int8_per_channel` in
`kernels.quant`), as in SmoothQuant-style W8A8 serving.

Design: one program per BLOCK_M x BLOCK_N tile of C, grouped along M for L2 reuse (Triton tutorial 03). The K loop
feeds int8 tiles to the tensor cores with an exact int32 accumulator; both scales are rank-1, so they are applied
once in the epilogue (acc * a_scale[m] * b_scale[n]) rather than per K step, and the result is rounded to bf16.
B is read K-contiguous ("NT" layout), which is what the int8 tensor-core path wants.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.common import check_out, check_same_device, check_shape, check_tensor, interpreting, next_pow2
from kernels.quant import dequantize_int8_rows


@triton.jit
def _gemm_int8_kernel(
    # Pointers: A[M, K] int8, A scales [M] fp32, B[N, K] int8, B scales [N] fp32, C[M, N] bf16
    a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr,
    # Matrix dimensions; M_BUCKET (next power of two of M) is only the autotune key
    M, N, K, M_BUCKET,
    # Strides, in elements
    stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,  # tiles of M per L2 group
):
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

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        mask_k = offs_k < K - kb * BLOCK_K
        a = tl.load(a_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0)
        b = tl.load(b_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    a_scale = tl.load(a_scale_ptr + offs_m, mask=mask_m, other=0.0)
    b_scale = tl.load(b_scale_ptr + offs_n, mask=mask_n, other=0.0)
    c = acc.to(tl.float32) * a_scale[:, None] * b_scale[None, :]
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c.to(tl.bfloat16), mask=mask_m[:, None] & mask_n[None, :])


_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
    for bm in (16, 64, 128) for bn in (64, 128, 256) for bk in (64, 128) for w in (4, 8) for s in (3, 4)
]


def _keep(conf: triton.Config) -> bool:
    """As for FP8: 4 warps per 64 rows, 8 for 128-row tiles (int32 accumulator <= 128 registers per thread);
    128-deep K steps (one 128-byte line per row) except on the largest tile, where 64 keeps 4 stages in shared
    memory; decode tiles (16 rows) take 4 warps and 4 stages."""
    bm, bn, bk = conf.kwargs["BLOCK_M"], conf.kwargs["BLOCK_N"], conf.kwargs["BLOCK_K"]
    w, s = conf.num_warps, conf.num_stages
    if bm == 16:
        return bn <= 128 and bk == 128 and w == 4 and s == 4
    if bm == 64:
        return w == 4 and bk == 128 and bn >= 128 and s == 3 + (bn == 128)
    return bn >= 128 and w == 8 and bk == (64 if bn == 256 else 128) and s == (4 if bn == 256 else 3)


def _prune(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
    """Skip tiles taller than the padded M, and 16-row tiles once M is large."""
    m = named_args["M_BUCKET"]
    kept = [c for c in configs if c.kwargs["BLOCK_M"] <= max(16, m) and (m <= 64 or c.kwargs["BLOCK_M"] > 16)]
    return kept or configs[:1]


# key: M_BUCKET (M rounded up to a power of two, so serving batch sizes reuse a tuning), N, K.
_gemm_int8_tuned = triton.autotune(configs=[c for c in _CONFIGS if _keep(c)], key=["M_BUCKET", "N", "K"],
                                   prune_configs_by={"early_config_prune": _prune})(_gemm_int8_kernel)
_INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 64, "GROUP_M": 2}


def gemm_int8(a_int8: torch.Tensor, a_scales: torch.Tensor, b_int8: torch.Tensor, b_scales: torch.Tensor,
              out: torch.Tensor | None = None) -> torch.Tensor:
    """C[M, N] bf16 = (a_int8[M, K] * a_scales[M]) @ (b_int8[N, K] * b_scales[N])^T, int32 accumulation.

    Scales are fp32 and contiguous; `out`, if given, must be a contiguous bf16 [M, N] tensor.
    """
    check_tensor("a_int8", a_int8, [torch.int8], 2)
    check_tensor("b_int8", b_int8, [torch.int8], 2)
    check_tensor("a_scales", a_scales, [torch.float32], 1)
    check_tensor("b_scales", b_scales, [torch.float32], 1)
    m, k = a_int8.shape
    n, kb = b_int8.shape
    if kb != k:
        raise ValueError(f"a_int8 is [M, K] = {tuple(a_int8.shape)} but b_int8 is [N, K] = {tuple(b_int8.shape)}: "
                         "K must match (B is the [N, K] weight, not transposed)")
    check_shape("a_scales", a_scales, (m,), "[M] (one per token)")
    check_shape("b_scales", b_scales, (n,), "[N] (one per output channel)")
    a_scales, b_scales = a_scales.contiguous(), b_scales.contiguous()
    device = check_same_device(a_int8=a_int8, a_scales=a_scales, b_int8=b_int8, b_scales=b_scales)
    c = check_out(out, (m, n), torch.bfloat16, device)
    if m == 0 or n == 0:
        return c
    args = (a_int8, a_scales, b_int8, b_scales, c, m, n, k, next_pow2(m),
            a_int8.stride(0), a_int8.stride(1), b_int8.stride(0), b_int8.stride(1), c.stride(0), c.stride(1))
    if interpreting():
        meta = _INTERPRETER_CONFIG
        grid = (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
        _gemm_int8_kernel[grid](*args, **meta)
    else:
        def grid(meta: dict) -> tuple[int]:
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
        _gemm_int8_tuned[grid](*args)
    return c


def reference_gemm_int8(a_int8: torch.Tensor, a_scales: torch.Tensor, b_int8: torch.Tensor,
                        b_scales: torch.Tensor, compute_dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Plain torch: dequantize both operands in `compute_dtype` and multiply; returns [M, N] in `compute_dtype`."""
    return dequantize_int8_rows(a_int8, a_scales, compute_dtype) @ dequantize_int8_rows(b_int8, b_scales,
                                                                                          compute_dtype).t()
