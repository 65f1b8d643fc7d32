"""One-layer toys of each kind priced by hand with the analytical pricer (no launch overhead, toy peaks)."""
from __future__ import annotations

import dataclasses

import pytest

from inferplan.specs import MoESpec
from sim.core.cost.base import PARTS
from tests.cost.toys import BW, EFF, GQA, MLA, MOE, decode, gemm, model, prefill, roof

OVERHEAD = 1e-3


def elementwise(elements: float) -> float:
    return roof(4 * elements, 3 * elements * 2, EFF["elementwise"])


def test_dense_gqa_prefill_by_hand():
    q, H, h, kv, d, inter, V = 64, 1024, 8, 2, 128, 4096, 1000
    cost = model(GQA).step_cost(prefill(1, q))
    dense = (gemm(q, (h + 2 * kv) * d, H) + gemm(q, H, h * d)      # QKV, O
             + gemm(q, 2 * inter, H) + gemm(q, H, inter)          # gated MLP: gate+up, down
             + gemm(1, V, H))                                     # LM head, one sampled row
    attention = roof(4 * h * d * q * (q + 1) / 2, 2 * q * h * d * 2 + 2 * q * kv * d * 2, EFF["attn_prefill"])
    elem = elementwise(q * (4 * H + 2 * inter + h * d))
    assert cost.parts["dense_gemm"] == pytest.approx(dense, rel=1e-12)
    assert cost.parts["attention"] == pytest.approx(attention, rel=1e-12)
    assert cost.parts["elementwise"] == pytest.approx(elem, rel=1e-12)
    assert cost.parts["moe_gemm"] == cost.parts["communication"] == 0.0
    assert cost.parts["overhead"] == OVERHEAD
    assert cost.total_s == pytest.approx(dense + attention + elem + OVERHEAD, rel=1e-12)
    assert sum(cost.parts[p] for p in PARTS) == pytest.approx(cost.total_s, rel=1e-15)


def test_dense_gqa_decode_reads_every_kv_byte_once():
    n, ctx, H, h, kv, d = 4, 100, 1024, 8, 2, 128
    cost = model(GQA, kv_dtype="fp8").step_cost(decode(n, ctx))
    ctx_sum = n * (ctx + 1)
    attention = roof(4 * h * d * ctx_sum, 2 * ctx_sum * kv * d * 1.0 + 2 * n * h * d * 2, EFF["attn_decode"])
    assert cost.parts["attention"] == pytest.approx(attention, rel=1e-12)


def test_mla_decode_by_hand():
    n, ctx, H, h = 4, 100, 1024, 8
    rank, rope, nope, v, qr, inter, V = 128, 32, 64, 64, 256, 2048, 1000
    ctx_sum = n * (ctx + 1)
    cost = model(MLA).step_cost(decode(n, ctx))
    dense = (gemm(n, qr, H) + gemm(n, h * (nope + rope), qr)      # low-rank Q
             + gemm(n, rank + rope, H) + gemm(n, H, h * v)        # latent KV down-projection, O
             + gemm(n, h * rank, nope) + gemm(n, h * v, rank)     # absorbed per-head products
             + gemm(n, 2 * inter, H) + gemm(n, H, inter) + gemm(n, V, H))
    attention = roof(2 * h * ctx_sum * (rank + rope) + 2 * h * ctx_sum * rank,
                     ctx_sum * (rank + rope) * 2 + n * h * (2 * rank + rope) * 2, EFF["attn_mla_decode"])
    elem = elementwise(n * (4 * H + 2 * inter + h * (nope + rope)))
    assert cost.parts["dense_gemm"] == pytest.approx(dense, rel=1e-12)
    assert cost.parts["attention"] == pytest.approx(attention, rel=1e-12)
    assert cost.total_s == pytest.approx(dense + attention + elem + OVERHEAD, rel=1e-12)


def test_moe_prefill_by_hand():
    T, H, E, k, ei, V = 64, 1024, 4, 2, 512, 1000
    cost = model(MOE).step_cost(prefill(1, T))
    rows = T * k
    active = E * (1 - (1 - k / E) ** T)
    routed = (roof(2 * rows * 2 * ei * H, active * 2 * ei * H * 2 + rows * (H * 2 + 2 * ei * 2), EFF["moe_gemm"])
              + roof(2 * rows * H * ei, active * H * ei * 2 + rows * (ei * 2 + H * 2), EFF["moe_gemm"]))
    dense = (gemm(T, 12 * 128, H) + gemm(T, H, 8 * 128) + gemm(T, E, H)   # QKV, O, router
             + gemm(T, 2 * ei, H) + gemm(T, H, ei) + gemm(1, V, H))       # shared expert, LM head
    assert cost.parts["moe_gemm"] == pytest.approx(routed, rel=1e-12)
    assert cost.parts["dense_gemm"] == pytest.approx(dense, rel=1e-12)
    assert cost.parts["elementwise"] == pytest.approx(elementwise(T * (4 * H + 2 * ei * k + 8 * 128)), rel=1e-12)


def test_moe_with_one_expert_top1_equals_the_dense_model_plus_its_router():
    """EP = 1, one expert, top-1, no shared expert, no imbalance: the routed expert is the dense MLP (priced as a
    grouped GEMM, here at the same efficiency) and the only extra is the router's [T, 1] GEMM."""
    one = dataclasses.replace(MOE, moe=MoESpec(num_experts=1, top_k=1, expert_intermediate_size=4096))
    eff = EFF | {"moe_gemm": EFF["gemm"]}
    for shape in (prefill(2, 300), decode(16, 500)):
        moe = model(one, eff=eff).step_cost(shape)
        dense = model(GQA, eff=eff).step_cost(shape)
        router = gemm(shape.num_tokens, 1, 1024)
        assert moe.parts["dense_gemm"] + moe.parts["moe_gemm"] == pytest.approx(dense.parts["dense_gemm"] + router,
                                                                               rel=1e-12)
        for part in ("attention", "elementwise", "communication", "overhead"):
            assert moe.parts[part] == pytest.approx(dense.parts[part], rel=1e-12), part


def test_weight_formats_change_gemm_bytes_and_peak():
    """Decode GEMMs are bandwidth-bound: int4 weight-only reads ~1/4 of the bf16 bytes; fp8 prefill runs at the fp8
    peak. Per-group formats apply to their own GEMMs only."""
    n, H, h, kv, d, inter = 2, 1024, 8, 2, 128, 4096
    bf16 = model(GQA).step_cost(decode(n, 10)).parts["dense_gemm"]
    wb_int4 = 0.5 + 4 / 128
    int4 = model(GQA, deployment={"weights": {"ffn": "int4_wo"}}).step_cost(decode(n, 10)).parts["dense_gemm"]
    assert int4 == pytest.approx(bf16 - gemm(n, 2 * inter, H) - gemm(n, H, inter)
                                 + gemm(n, 2 * inter, H, wb=wb_int4) + gemm(n, H, inter, wb=wb_int4), rel=1e-12)
    fp8 = model(GQA, weights_dtype="fp8_block").step_cost(prefill(1, 4096)).parts["dense_gemm"]
    ab = 1 + 4 / 128
    wb = 1 + 4 / 16384
    q = 4096
    expected = (gemm(q, (h + 2 * kv) * d, H, wb, ab, 2e12) + gemm(q, H, h * d, wb, ab, 2e12)
                + gemm(q, 2 * inter, H, wb, ab, 2e12) + gemm(q, H, inter, wb, ab, 2e12) + gemm(1, 1000, H))
    assert fp8 == pytest.approx(expected, rel=1e-12)
    assert BW == 1e11  # the toy numbers the hand formulas assume
