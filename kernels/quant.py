"""Quantize, pack and dequantize: pure torch functions, the format in every name.

All quantization happens on the host side in torch (the kernels only consume the formats): Triton's `.to(float8)`
rounding can differ from torch's, and one rounding rule everywhere keeps kernels and references comparable.

Formats
- `fp8_block128`: e4m3 values with fp32 scales, value = q * scale. Activations [M, K] have one scale per 1x128
  group of a row, [M, ceil(K/128)]; weights [..., N, K] one per 128x128 block, [..., ceil(N/128), ceil(K/128)]
  (DeepSeek-V3 / DeepGEMM). scale = amax / 448, so each group's largest magnitude maps to +-448.
- `int8_per_token` / `int8_per_channel`: symmetric int8 in [-127, 127], one fp32 scale per row (token of the
  activation [M, K], output channel of the weight [N, K]).
- `int4_wo_g{G}` (W4A16): weight [N, K] stored transposed and packed two 4-bit codes per byte along K,
  `packed[ceil(K/2), N]` uint8 (low nibble = even k, high nibble = odd k), with bf16 `scales[ceil(K/G), N]` and,
  for the asymmetric variant, bf16 integer-valued `zeros[ceil(K/G), N]`. value = (code - zero) * scale, where the
  symmetric variant has an implicit zero of 8 (codes 0..15 hold -8..7).
"""
from __future__ import annotations

import math

import torch

from kernels.common import FP8_DTYPE

FP8_E4M3_MAX = 448.0
FP8_GROUP = 128
INT4_SYMMETRIC_ZERO = 8
_TINY = 1e-12  # floor on a group's amax so that an all-zero group gets a finite scale


def _pad_to(x: torch.Tensor, dim: int, multiple: int) -> torch.Tensor:
    pad = (-x.shape[dim]) % multiple
    if pad == 0:
        return x
    shape = list(x.shape)
    shape[dim] = pad
    return torch.cat([x, x.new_zeros(shape)], dim=dim)


def _block_amax(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Max |x| over (rows x cols) blocks of the last two dims of x[..., R, C] -> [..., ceil(R/rows), ceil(C/cols)]."""
    xp = _pad_to(_pad_to(x.abs().float(), -2, rows), -1, cols)
    *lead, r, c = xp.shape
    return xp.reshape(*lead, r // rows, rows, c // cols, cols).amax(dim=(-3, -1))


def _expand_blocks(scales: torch.Tensor, rows: int, cols: int, shape: torch.Size) -> torch.Tensor:
    """Broadcast per-block scales [..., ceil(R/rows), ceil(C/cols)] back to the element grid `shape` [..., R, C]."""
    s = scales.repeat_interleave(rows, dim=-2).repeat_interleave(cols, dim=-1)
    return s[..., : shape[-2], : shape[-1]]


def _quantize_fp8_blocks(x: torch.Tensor, rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    scales = (_block_amax(x, rows, cols).clamp_min(_TINY) / FP8_E4M3_MAX).float()
    q = (x.float() / _expand_blocks(scales, rows, cols, x.shape)).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX)
    return q.to(FP8_DTYPE), scales


def quantize_fp8_block128_act(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """a[M, K] float -> (a_e4m3[M, K], scales fp32[M, ceil(K/128)]): one scale per 1x128 group of each row."""
    return _quantize_fp8_blocks(a, 1, FP8_GROUP)


def quantize_fp8_block128_weight(b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """b[..., N, K] float -> (b_e4m3[..., N, K], scales fp32[..., ceil(N/128), ceil(K/128)]): one per 128x128 block.

    Leading dims are kept, so MoE weights w[E, N, K] quantize in one call.
    """
    return _quantize_fp8_blocks(b, FP8_GROUP, FP8_GROUP)


def dequantize_fp8_block128_act(a_fp8: torch.Tensor, scales: torch.Tensor,
                                dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Inverse of `quantize_fp8_block128_act`, exact in float64: a[M, K] = q * scale of its 1x128 group."""
    return a_fp8.to(dtype) * _expand_blocks(scales.to(dtype), 1, FP8_GROUP, a_fp8.shape)


def dequantize_fp8_block128_weight(b_fp8: torch.Tensor, scales: torch.Tensor,
                                   dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Inverse of `quantize_fp8_block128_weight`: b[..., N, K] = q * scale of its 128x128 block."""
    return b_fp8.to(dtype) * _expand_blocks(scales.to(dtype), FP8_GROUP, FP8_GROUP, b_fp8.shape)


def _quantize_int8_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scales = (x.abs().float().amax(dim=-1).clamp_min(_TINY) / 127.0).float()
    q = torch.round(x.float() / scales[..., None]).clamp(-127, 127)
    return q.to(torch.int8), scales


def quantize_int8_per_token(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """a[M, K] float -> (a_int8[M, K], scales fp32[M]): symmetric, one scale per token (row), amax -> 127."""
    return _quantize_int8_rows(a)


def quantize_int8_per_channel(b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """b[N, K] float -> (b_int8[N, K], scales fp32[N]): symmetric, one scale per output channel (row of B)."""
    return _quantize_int8_rows(b)


def dequantize_int8_rows(q: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """x[R, C] = q[R, C] * scales[R]; the inverse of both int8 quantizers."""
    return q.to(dtype) * scales.to(dtype)[..., None]


def pack_int4_k_pairs(codes: torch.Tensor) -> torch.Tensor:
    """codes[K, N] uint8 in 0..15 -> packed[ceil(K/2), N] uint8: row 2i in the low nibble, row 2i+1 in the high."""
    if codes.dtype != torch.uint8 or int(codes.max()) > 15:
        raise ValueError("codes must be uint8 values in 0..15")
    c = _pad_to(codes, 0, 2)
    return c[0::2] | (c[1::2] << 4)


def unpack_int4_k_pairs(packed: torch.Tensor, k: int) -> torch.Tensor:
    """packed[ceil(K/2), N] uint8 -> codes[K, N] uint8: the inverse of `pack_int4_k_pairs`."""
    codes = torch.stack([packed & 0xF, packed >> 4], dim=1).reshape(-1, packed.shape[1])
    return codes[:k]


def quantize_int4_wo(w: torch.Tensor, symmetric: bool, group_size: int
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """w[N, K] float -> (packed uint8[ceil(K/2), N], scales bf16[ceil(K/G), N], zeros bf16[ceil(K/G), N] | None).

    Groups run along K (the reduction dim). Symmetric: scale = amax / 7, codes = round(w / scale) + 8 clamped to
    0..15, no zeros tensor. Asymmetric: scale = (max - min) / 15, zero = round(-min / scale) in 0..15. Scales are
    rounded to bf16 before the codes are computed, so the stored scale is the one the codes were made with.
    """
    if group_size <= 0 or group_size % 2:
        raise ValueError(f"group_size must be a positive even number, got {group_size}")
    n, k = w.shape
    groups = math.ceil(k / group_size)
    wg = _pad_to(w.float().t(), 0, group_size).reshape(groups, group_size, n)  # [G, group, N]
    if symmetric:
        scales = (wg.abs().amax(dim=1).clamp_min(_TINY) / 7.0).to(torch.bfloat16)
        codes = torch.round(wg / scales.float()[:, None, :]).clamp(-8, 7) + INT4_SYMMETRIC_ZERO
        zeros = None
    else:
        lo, hi = wg.amin(dim=1).clamp_max(0.0), wg.amax(dim=1).clamp_min(0.0)
        scales = ((hi - lo).clamp_min(_TINY) / 15.0).to(torch.bfloat16)
        zeros_f = torch.round(-lo / scales.float()).clamp(0, 15)
        codes = torch.round(wg / scales.float()[:, None, :] + zeros_f[:, None, :]).clamp(0, 15)
        zeros = zeros_f.to(torch.bfloat16)
    codes = codes.reshape(groups * group_size, n)[:k].to(torch.uint8)
    return pack_int4_k_pairs(codes), scales, zeros


def quantize_int4_wo_g128(w: torch.Tensor, symmetric: bool
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """`quantize_int4_wo` with group size 128 (the format `gemm_int4_wo` is tuned for)."""
    return quantize_int4_wo(w, symmetric, 128)


def dequantize_int4_wo(packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None, k: int,
                       group_size: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Inverse of `quantize_int4_wo`: w[N, K] = (code - zero) * scale, computed in `dtype`."""
    codes = unpack_int4_k_pairs(packed, k).to(dtype)  # [K, N]
    zero = (zeros.to(dtype).repeat_interleave(group_size, 0)[:k] if zeros is not None
            else torch.full_like(codes, INT4_SYMMETRIC_ZERO))
    scale = scales.to(dtype).repeat_interleave(group_size, 0)[:k]
    return ((codes - zero) * scale).t()
