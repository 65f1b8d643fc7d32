"""Adapter from op shapes to our Triton kernels (`kernels/`): the only module that imports them.

Each builder makes operands in the layout and number format its kernel takes (random codes and scales, generated
directly in the format, see `kernels.quant` for the formats) and returns a `Bench` whose `run` is one kernel
launch. Activations arrive already quantized: in a serving stack activation quantization is a separate (fused)
pass, priced as elementwise work. Imports happen inside the
builders, so the CPU path never loads Triton kernels; a renamed wrapper touches only this file.

Builders raise `Unsupported` for shapes a kernel does not take (e.g. prefill head dims other than 64/128); the
sweep records those as skipped, not failed. Under `TRITON_INTERPRET=1` the same builders run on CPU tensors, which
is how the GPU path is rehearsed on machines without a GPU.
"""
from __future__ import annotations

import math

import torch

from calibrate.shapes import OpShape
from calibrate.torch_ops import Bench, Unsupported, expert_split, rand, rand_int8, rand_scales

PAGE_TOKENS_GQA = 16   # vLLM's default KV block size
PAGE_TOKENS_MLA = 64   # FlashMLA's block size


def _block_table(b: int, pages_per_seq: int, device: torch.device) -> torch.Tensor:
    """int32 [b, pages]: a random permutation of all cache blocks, so pages are scattered as in a real cache."""
    return torch.randperm(b * pages_per_seq, device=device, dtype=torch.int64).to(torch.int32).view(b, pages_per_seq)


def _fp8(shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    return rand(shape, torch.float8_e4m3fn, device, 64.0)  # e4m3 codes spread over its +-448 range


def gemm_fp8_block(shape: OpShape, device: torch.device) -> Bench:
    """Operands made directly in the `fp8_block128` format (random codes and scales; quantizing a float copy
    would need 4x the memory at DeepSeek sizes)."""
    from kernels.gemm_fp8_block import gemm_fp8_block as kernel
    m, n, k = shape.dim("m"), shape.dim("n"), shape.dim("k")
    kb, nb = math.ceil(k / 128), math.ceil(n / 128)

    def make() -> tuple:
        return (_fp8((m, k), device), rand_scales((m, kb), torch.float32, device), _fp8((n, k), device),
                rand_scales((nb, kb), torch.float32, device))
    return Bench(make, lambda x: kernel(*x), m * k + n * k)


def gemm_int8(shape: OpShape, device: torch.device) -> Bench:
    """W8A8 operands: int8 codes, fp32 per-token and per-channel scales."""
    from kernels.gemm_int8 import gemm_int8 as kernel
    m, n, k = shape.dim("m"), shape.dim("n"), shape.dim("k")

    def make() -> tuple:
        return (rand_int8((m, k), device), rand_scales((m,), torch.float32, device), rand_int8((n, k), device),
                rand_scales((n,), torch.float32, device))
    return Bench(make, lambda x: kernel(*x), m * k + n * k)


def gemm_int4_wo(shape: OpShape, device: torch.device) -> Bench:
    """W4A16, symmetric, group 128: random packed codes [ceil(K/2), N] uint8 and bf16 scales [ceil(K/128), N]."""
    from kernels.gemm_int4_wo import gemm_int4_wo as kernel
    m, n, k = shape.dim("m"), shape.dim("n"), shape.dim("k")

    def make() -> tuple:
        packed = torch.randint(0, 256, (math.ceil(k / 2), n), dtype=torch.uint8, device=device)
        return rand((m, k), torch.bfloat16, device), packed, rand_scales((math.ceil(k / 128), n), torch.bfloat16,
                                                                         device)
    return Bench(make, lambda x: kernel(x[0], x[1], x[2], None, 128), 2 * m * k + n * k / 2)


def _expert_offsets(t: int, e: int, device: torch.device) -> torch.Tensor:
    """int32 [e+1] cumulative row offsets of `t` sorted rows spread evenly over `e` experts."""
    counts = torch.tensor([0] + expert_split(t, e), dtype=torch.int64)
    return counts.cumsum(0).to(torch.int32).to(device)


def moe_grouped(shape: OpShape, device: torch.device) -> Bench:
    """bf16 or fp8_block grouped GEMM over the active experts only (idle experts' weights are never read)."""
    import kernels.moe_grouped as moe
    t, e, n, k = (shape.dim(d) for d in ("t", "e", "n", "k"))
    if shape.dtype == "bf16":
        def make() -> tuple:
            return (rand((t, k), torch.bfloat16, device), rand((e, n, k), torch.bfloat16, device, k ** -0.5),
                    _expert_offsets(t, e, device))
        return Bench(make, lambda x: moe.moe_grouped_gemm(*x), 2 * (t * k + e * n * k))
    if shape.dtype == "fp8_block":
        kb, nb = math.ceil(k / 128), math.ceil(n / 128)

        def make_fp8() -> tuple:
            return (_fp8((t, k), device), rand_scales((t, kb), torch.float32, device), _fp8((e, n, k), device),
                    rand_scales((e, nb, kb), torch.float32, device), _expert_offsets(t, e, device))
        return Bench(make_fp8, lambda x: moe.moe_grouped_gemm_fp8_block(*x), t * k + e * n * k)
    raise Unsupported(f"moe_grouped has no {shape.dtype} variant")


def attn_prefill(shape: OpShape, device: torch.device) -> Bench:
    """Packed varlen causal attention: b sequences of q new tokens after c cached ones."""
    from kernels.attn_prefill import attn_prefill as kernel
    b, q, c, h, kvh, dqk, dv = (shape.dim(d) for d in ("b", "q", "c", "h", "kvh", "dqk", "dv"))
    if dqk != dv or dqk not in (64, 128):
        raise Unsupported(f"attn_prefill takes equal q/k/v head dims of 64 or 128, got {dqk}/{dv}")

    def make() -> tuple:
        bf = torch.bfloat16
        cu_q = (torch.arange(b + 1, dtype=torch.int32) * q).to(device)
        cu_k = (torch.arange(b + 1, dtype=torch.int32) * (c + q)).to(device)
        return (rand((b * q, h, dqk), bf, device), rand((b * (c + q), kvh, dqk), bf, device),
                rand((b * (c + q), kvh, dv), bf, device), cu_q, cu_k)
    return Bench(make, lambda x: kernel(*x, max_seqlen_q=q),
                 2 * b * (h * q * dqk + kvh * (c + q) * (dqk + dv)))


def attn_paged_decode(shape: OpShape, device: torch.device) -> Bench:
    from kernels.attn_paged_decode import attn_paged_decode as kernel
    b, c, h, kvh, d = (shape.dim(x) for x in ("b", "c", "h", "kvh", "d"))
    pages = math.ceil(c / PAGE_TOKENS_GQA)

    def make() -> tuple:
        bf = torch.bfloat16
        k_cache = rand((b * pages, PAGE_TOKENS_GQA, kvh, d), bf, device)
        v_cache = rand((b * pages, PAGE_TOKENS_GQA, kvh, d), bf, device)
        lens = torch.full((b,), c, dtype=torch.int32, device=device)
        return rand((b, h, d), bf, device), k_cache, v_cache, _block_table(b, pages, device), lens
    return Bench(make, lambda x: kernel(*x), 2 * b * (h * d + 2 * kvh * c * d))


def attn_mla_decode(shape: OpShape, device: torch.device) -> Bench:
    from kernels.attn_mla_decode import attn_mla_decode as kernel
    b, c, h, r, rope = (shape.dim(x) for x in ("b", "c", "h", "r", "rope"))
    pages = math.ceil(c / PAGE_TOKENS_MLA)

    def make() -> tuple:
        bf = torch.bfloat16
        cache = rand((b * pages, PAGE_TOKENS_MLA, r + rope), bf, device)
        lens = torch.full((b,), c, dtype=torch.int32, device=device)
        return rand((b, h, r + rope), bf, device), cache, lens, _block_table(b, pages, device)
    return Bench(make, lambda x: kernel(x[0], x[1], x[2], x[3], kv_lora_rank=r),
                 2 * b * (h * (r + rope) + c * (r + rope)))


BUILDERS = {
    "kernels.gemm_fp8_block": gemm_fp8_block,
    "kernels.gemm_int8": gemm_int8,
    "kernels.gemm_int4_wo": gemm_int4_wo,
    "kernels.moe_grouped": moe_grouped,
    "kernels.attn_prefill": attn_prefill,
    "kernels.attn_paged_decode": attn_paged_decode,
    "kernels.attn_mla_decode": attn_mla_decode,
}


def reference(impl: str, shape: OpShape, x: tuple) -> torch.Tensor:
    """The kernel module's plain-torch reference (float64) on the inputs `x` of `BUILDERS[impl]`."""
    if impl == "kernels.gemm_fp8_block":
        from kernels.gemm_fp8_block import reference_gemm_fp8_block
        return reference_gemm_fp8_block(*x)
    if impl == "kernels.gemm_int8":
        from kernels.gemm_int8 import reference_gemm_int8
        return reference_gemm_int8(*x)
    if impl == "kernels.gemm_int4_wo":
        from kernels.gemm_int4_wo import reference_gemm_int4_wo
        return reference_gemm_int4_wo(x[0], x[1], x[2], None, 128)
    if impl == "kernels.moe_grouped":
        from kernels.moe_grouped import reference_moe_grouped_gemm
        if shape.dtype == "bf16":
            return reference_moe_grouped_gemm(*x)
        return reference_moe_grouped_gemm(x[0], x[2], x[4], x[1], x[3])
    if impl == "kernels.attn_prefill":
        from kernels.attn_prefill import reference_attn_prefill
        return reference_attn_prefill(*x)
    if impl == "kernels.attn_paged_decode":
        from kernels.attn_paged_decode import reference_attn_paged_decode
        return reference_attn_paged_decode(*x)
    if impl == "kernels.attn_mla_decode":
        from kernels.attn_mla_decode import reference_attn_mla_decode
        return reference_attn_mla_decode(x[0], x[1], x[2], x[3], kv_lora_rank=shape.dim("r"))
    raise KeyError(impl)
