"""The benchmark's cases: each kernel at DeepSeek-V3 and Llama-3-70B layer shapes (toy shapes with `quick`).

A `Case` names what is measured; its `build(device, ref_dtype)` makes fresh random inputs on the device and
returns a `Bound`: the kernel call, the reference call, a library baseline, and the FLOP and byte counts from
`kernels.costs`. Shapes are whole-model (no tensor parallelism): one GPU serving one layer.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from kernels import costs, quant
from kernels.attn_mla_decode import attn_mla_decode, reference_attn_mla_decode
from kernels.attn_paged_decode import attn_paged_decode, reference_attn_paged_decode
from kernels.attn_prefill import attn_prefill, reference_attn_prefill
from kernels.common import FP8_DTYPE
from kernels.gemm_fp8_block import gemm_fp8_block, reference_gemm_fp8_block
from kernels.gemm_int4_wo import gemm_int4_wo, reference_gemm_int4_wo
from kernels.gemm_int8 import gemm_int8, reference_gemm_int8
from kernels.moe_grouped import (moe_grouped_gemm, moe_grouped_gemm_fp8_block, reference_moe_grouped_gemm,
                                 sort_tokens_by_expert)


@dataclass
class Bound:
    """One case with its inputs allocated: callables for the kernel, the reference and the baseline."""
    run: Callable[[], torch.Tensor]
    reference: Callable[[], torch.Tensor]
    baselines: list[tuple[str, Callable[[], object]]]  # tried in order; the first that runs is timed
    flops: int
    bytes: int


@dataclass(frozen=True)
class Case:
    kernel: str  # module / wrapper name
    variant: str  # format or dtype: "fp8_block128", "bf16", "fp8_kv", ...
    model: str
    layer: str
    precision: str  # the tensor-core peak the roofline uses: "bf16", "fp8" or "int8"
    build: Callable[[torch.device, torch.dtype], Bound] = field(repr=False, compare=False)
    dims: dict[str, int] = field(default_factory=dict, compare=False)


def _bf16_matmul(x: torch.Tensor, w: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: torch.matmul(x, w.t())


def _gemm_fp8(m: int, n: int, k: int, device: torch.device, ref_dtype: torch.dtype) -> Bound:
    a, a_s = quant.quantize_fp8_block128_act(torch.randn(m, k, device=device))
    b, b_s = quant.quantize_fp8_block128_weight(torch.randn(n, k, device=device))
    one = torch.ones((), device=device)
    return Bound(lambda: gemm_fp8_block(a, a_s, b, b_s), lambda: reference_gemm_fp8_block(a, a_s, b, b_s, ref_dtype),
                 [("torch._scaled_mm fp8 per-tensor", lambda: torch._scaled_mm(
                     a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)),
                  ("torch.matmul bf16", _bf16_matmul(a.to(torch.bfloat16), b.to(torch.bfloat16)))],
                 costs.flops_gemm(m, n, k), costs.bytes_gemm_fp8_block(m, n, k))


def _gemm_int8(m: int, n: int, k: int, device: torch.device, ref_dtype: torch.dtype) -> Bound:
    a, a_s = quant.quantize_int8_per_token(torch.randn(m, k, device=device))
    b, b_s = quant.quantize_int8_per_channel(torch.randn(n, k, device=device))
    x, w = torch.randn(m, k, device=device, dtype=torch.bfloat16), torch.randn(n, k, device=device,
                                                                               dtype=torch.bfloat16)
    return Bound(lambda: gemm_int8(a, a_s, b, b_s), lambda: reference_gemm_int8(a, a_s, b, b_s, ref_dtype),
                 [("torch.matmul bf16", _bf16_matmul(x, w))],
                 costs.flops_gemm(m, n, k), costs.bytes_gemm_int8(m, n, k))


def _gemm_int4(m: int, n: int, k: int, device: torch.device, ref_dtype: torch.dtype) -> Bound:
    x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    packed, scales, zeros = quant.quantize_int4_wo_g128(torch.randn(n, k, device=device), symmetric=True)
    w = quant.dequantize_int4_wo(packed, scales, zeros, k, 128, torch.bfloat16)
    return Bound(lambda: gemm_int4_wo(x, packed, scales, zeros), lambda: reference_gemm_int4_wo(
                     x, packed, scales, zeros, 128, ref_dtype),
                 [("torch.matmul bf16", _bf16_matmul(x, w))],
                 costs.flops_gemm(m, n, k), costs.bytes_gemm_int4_wo(m, n, k))


def _moe(fp8: bool, tokens: int, top_k: int, experts: int, n: int, k: int) -> Callable[..., Bound]:
    def build(device: torch.device, ref_dtype: torch.dtype) -> Bound:
        ids = torch.rand(tokens, experts, device=device).topk(top_k, dim=1).indices
        token_index, _, offsets = sort_tokens_by_expert(ids, experts)
        rows, active = tokens * top_k, int((offsets[1:] > offsets[:-1]).sum())
        x = torch.randn(tokens, k, device=device, dtype=torch.bfloat16)[token_index]
        w = torch.randn(experts, n, k, device=device, dtype=torch.bfloat16)
        ends = offsets[1:].clone()
        bounds = offsets.tolist()
        loop = [(bounds[e], bounds[e + 1], e) for e in range(experts) if bounds[e + 1] > bounds[e]]
        baselines = [("torch._grouped_mm bf16", lambda: torch._grouped_mm(x, w.transpose(1, 2), offs=ends)),
                     ("per-expert torch.matmul bf16", lambda: [x[lo:hi] @ w[e].t() for lo, hi, e in loop])]
        if not fp8:
            return Bound(lambda: moe_grouped_gemm(x, w, offsets),
                         lambda: reference_moe_grouped_gemm(x, w, offsets, compute_dtype=ref_dtype), baselines,
                         costs.flops_moe_grouped(rows, n, k), costs.bytes_moe_grouped_bf16(rows, n, k, active))
        x8, xs = quant.quantize_fp8_block128_act(x)
        w8, ws = quant.quantize_fp8_block128_weight(w)
        return Bound(lambda: moe_grouped_gemm_fp8_block(x8, xs, w8, ws, offsets),
                     lambda: reference_moe_grouped_gemm(x8, w8, offsets, xs, ws, ref_dtype), baselines,
                     costs.flops_moe_grouped(rows, n, k), costs.bytes_moe_grouped_fp8_block(rows, n, k, active))
    return build


def _prefill(batch: int, len_q: int, len_k: int, hq: int, hkv: int, d: int) -> Callable[..., Bound]:
    def build(device: torch.device, ref_dtype: torch.dtype) -> Bound:
        q = torch.randn(batch * len_q, hq, d, device=device, dtype=torch.bfloat16)
        k = torch.randn(batch * len_k, hkv, d, device=device, dtype=torch.bfloat16)
        v = torch.randn_like(k)
        cu_q = torch.arange(0, batch + 1, device=device, dtype=torch.int32) * len_q
        cu_k = torch.arange(0, batch + 1, device=device, dtype=torch.int32) * len_k
        baselines = []
        if len_q == len_k:  # SDPA's is_causal is top-left aligned: comparable only without a cached prefix
            sq = q.view(batch, len_q, hq, d).transpose(1, 2)
            sk = k.view(batch, len_k, hkv, d).transpose(1, 2).repeat_interleave(hq // hkv, 1).contiguous()
            sv = v.view(batch, len_k, hkv, d).transpose(1, 2).repeat_interleave(hq // hkv, 1).contiguous()
            baselines.append(("F.scaled_dot_product_attention", lambda: F.scaled_dot_product_attention(
                sq, sk, sv, is_causal=True)))
        return Bound(lambda: attn_prefill(q, k, v, cu_q, cu_k, max_seqlen_q=len_q),
                     lambda: reference_attn_prefill(q, k, v, cu_q, cu_k, compute_dtype=ref_dtype), baselines,
                     costs.flops_attn_prefill([len_q] * batch, [len_k] * batch, hq, d),
                     costs.bytes_attn_prefill([len_q] * batch, [len_k] * batch, hq, hkv, d))
    return build


def _paged(fp8: bool, batch: int, ctx: int, hq: int, hkv: int, d: int, page: int) -> Callable[..., Bound]:
    def build(device: torch.device, ref_dtype: torch.dtype) -> Bound:
        pages = math.ceil(ctx / page)
        q = torch.randn(batch, hq, d, device=device, dtype=torch.bfloat16)
        kf = torch.randn(batch * pages, page, hkv, d, device=device, dtype=torch.bfloat16)
        vf = torch.randn_like(kf)
        table = torch.randperm(batch * pages, device=device).view(batch, pages).to(torch.int32)
        lens = torch.full((batch,), ctx, device=device, dtype=torch.int32)
        k_scale = v_scale = 1.0
        kc, vc = kf, vf
        if fp8:  # per-tensor scales as vLLM's fp8 KV cache; clamped, since torch's cast overflows to NaN
            k_scale = v_scale = 0.02
            kc = (kf / k_scale).clamp(-quant.FP8_E4M3_MAX, quant.FP8_E4M3_MAX).to(FP8_DTYPE)
            vc = (vf / v_scale).clamp(-quant.FP8_E4M3_MAX, quant.FP8_E4M3_MAX).to(FP8_DTYPE)
        # baseline: SDPA on a contiguous cache, each KV head's query group as Hq/Hkv query rows (no KV expansion)
        kv_order = table.long().view(-1)
        sk = kf[kv_order].view(batch, pages * page, hkv, d)[:, :ctx].transpose(1, 2).contiguous()
        sv = vf[kv_order].view(batch, pages * page, hkv, d)[:, :ctx].transpose(1, 2).contiguous()
        sq = q.view(batch, hkv, hq // hkv, d)
        return Bound(lambda: attn_paged_decode(q, kc, vc, table, lens, k_scale=k_scale, v_scale=v_scale),
                     lambda: reference_attn_paged_decode(q, kc, vc, table, lens, k_scale=k_scale, v_scale=v_scale,
                                                         compute_dtype=ref_dtype),
                     [("F.scaled_dot_product_attention bf16 contiguous KV",
                       lambda: F.scaled_dot_product_attention(sq, sk, sv))],
                     costs.flops_attn_decode([ctx] * batch, hq, d),
                     costs.bytes_attn_paged_decode([ctx] * batch, hq, hkv, d, page, 1 if fp8 else 2))
    return build


def _mla(batch: int, ctx: int, heads: int, rank: int, rope: int, page: int) -> Callable[..., Bound]:
    def build(device: torch.device, ref_dtype: torch.dtype) -> Bound:
        pages = math.ceil(ctx / page)
        q = torch.randn(batch, heads, rank + rope, device=device, dtype=torch.bfloat16) * 0.1
        cache = torch.randn(batch * pages, page, rank + rope, device=device, dtype=torch.bfloat16)
        table = torch.randperm(batch * pages, device=device).view(batch, pages).to(torch.int32)
        lens = torch.full((batch,), ctx, device=device, dtype=torch.int32)
        latent = cache[table.long().view(-1)].view(batch, 1, pages * page, rank + rope)[:, :, :ctx].contiguous()
        sq = q.view(batch, 1, heads, rank + rope)
        scale = 192 ** -0.5
        return Bound(lambda: attn_mla_decode(q, cache, lens, table, rank, scale),
                     lambda: reference_attn_mla_decode(q, cache, lens, table, rank, scale, ref_dtype),
                     [("F.scaled_dot_product_attention bf16 contiguous latent",
                       lambda: F.scaled_dot_product_attention(sq, latent, latent[..., :rank], scale=scale))],
                     costs.flops_attn_mla_decode([ctx] * batch, heads, rank, rope),
                     costs.bytes_attn_mla_decode([ctx] * batch, heads, rank, rope, page))
    return build


# (model, layer, N, K): whole-model projection shapes
DEEPSEEK_V3_GEMMS = [("DeepSeek-V3", "q_b_proj", 24576, 1536), ("DeepSeek-V3", "o_proj", 7168, 16384)]
LLAMA3_70B_GEMMS = [("Llama-3-70B", "qkv_proj", 10240, 8192), ("Llama-3-70B", "down_proj", 8192, 28672)]
GEMM_M = (1, 16, 256, 4096, 16384)


def _gemm_cases(quick: bool) -> list[Case]:
    shapes = [("toy", "linear", 96, 320)] if quick else DEEPSEEK_V3_GEMMS + LLAMA3_70B_GEMMS
    ms = (1, 33) if quick else GEMM_M
    families = [("gemm_fp8_block", "fp8_block128", "fp8", _gemm_fp8), ("gemm_int8", "int8_w8a8", "int8", _gemm_int8),
                ("gemm_int4_wo", "int4_wo_g128_sym", "bf16", _gemm_int4)]
    return [Case(kernel, variant, model, layer, precision,
                 lambda dev, ref, f=fn, m=m, n=n, k=k: f(m, n, k, dev, ref), {"m": m, "n": n, "k": k})
            for kernel, variant, precision, fn in families for model, layer, n, k in shapes for m in ms]


def _moe_cases(quick: bool) -> list[Case]:
    # DeepSeek-V3 routed experts: 256 of them, top-8, expert FFN 2048 wide (gate+up fused: N = 4096)
    layers = [("toy", "experts_up", 64, 160)] if quick else [("DeepSeek-V3", "experts_gate_up", 4096, 7168),
                                                            ("DeepSeek-V3", "experts_down", 7168, 2048)]
    tokens = (6,) if quick else (1, 64, 1024, 16384)
    experts, top_k = (8, 2) if quick else (256, 8)
    return [Case("moe_grouped_gemm", variant, model, layer, "fp8" if fp8 else "bf16",
                 _moe(fp8, t, top_k, experts, n, k), {"m": t * top_k, "n": n, "k": k, "batch": t})
            for fp8, variant in ((False, "bf16"), (True, "fp8_block128"))
            for model, layer, n, k in layers for t in tokens]


def _attention_cases(quick: bool) -> list[Case]:
    # Llama-3-70B attention: 64 query heads, 8 KV heads, head dim 128; DeepSeek-V3 MLA: 128 heads, 512 + 64 latent
    hq, hkv, d = (4, 2, 64) if quick else (64, 8, 128)
    prefill = [(2, 24, 24), (1, 16, 40)] if quick else [(16, 1024, 1024), (4, 4096, 4096), (1, 16384, 16384),
                                                        (4, 2048, 8192)]
    decode = [(2, 70)] if quick else [(b, c) for b in (1, 16, 64) for c in (4096, 32768)]
    mla = [(2, 50)] if quick else [(b, c) for b in (1, 16, 64, 128) for c in (4096, 16384)]
    mla_heads = 16 if quick else 128
    model = "toy" if quick else "Llama-3-70B"
    cases = [Case("attn_prefill", "bf16_causal", model, "attention", "bf16", _prefill(b, lq, lk, hq, hkv, d),
                  {"batch": b, "seqlen_q": lq, "seqlen_k": lk, "heads_q": hq, "heads_kv": hkv, "head_dim": d})
             for b, lq, lk in prefill]
    cases += [Case("attn_paged_decode", "fp8_kv" if fp8 else "bf16_kv", model, "attention", "bf16",
                   _paged(fp8, b, c, hq, hkv, d, 16),
                   {"batch": b, "seqlen_q": 1, "seqlen_k": c, "heads_q": hq, "heads_kv": hkv, "head_dim": d})
              for fp8 in (False, True) for b, c in decode]
    cases += [Case("attn_mla_decode", "bf16_latent_paged64", "toy" if quick else "DeepSeek-V3", "attention_mla",
                   "bf16", _mla(b, c, mla_heads, 512, 64, 64),
                   {"batch": b, "seqlen_q": 1, "seqlen_k": c, "heads_q": mla_heads, "heads_kv": 1, "head_dim": 576})
              for b, c in mla]
    return cases


def all_cases(quick: bool) -> list[Case]:
    """Every benchmark case, GEMMs first; `quick` gives toy shapes that the CPU interpreter runs in seconds."""
    return _gemm_cases(quick) + _moe_cases(quick) + _attention_cases(quick)
