"""MTP drafts, sparse attention, cold experts, host overhead and the prefill -> decode KV hand-off, by hand."""
from __future__ import annotations

import dataclasses

import pytest

from calibrate.profile import Profile
from inferplan.errors import InputError
from inferplan.specs import load_hardware, load_model
from sim.config import CostConfig, PoolConfig
from sim.core.cost.deployment import HostOptions
from sim.core.cost.factory import kv_handoff_s
from sim.resolve import pool_pricing
from sim.core.cost.host import resolve_host
from tests.cost.toys import EFF, GQA, HOST_BW, MOE, PEAK_FP8, decode, gemm, model, prefill, roof

H, h, kv, d = 1024, 8, 2, 128
GQA_MTP = dataclasses.replace(GQA, mtp_modules=1)
MTP = {"mtp": {"draft_tokens": 1, "acceptance": [0.8]}}


def test_mtp_tokens_per_step():
    cost = model(GQA_MTP, deployment={"mtp": {"draft_tokens": 2, "acceptance": [0.8, 0.5]}})
    assert cost.tokens_per_step == pytest.approx(1 + 0.8 + 0.8 * 0.5)
    assert cost.draft_tokens == 2 and cost.acceptance == (0.8, 0.5)
    assert model(GQA).tokens_per_step == 1.0


def test_mtp_decode_verifies_two_tokens_and_runs_one_draft_layer():
    n, ctx = 4, 100
    mtp = model(GQA_MTP, deployment=MTP).step_cost(decode(n, ctx))
    plain = model(GQA)
    main, draft = plain.step_cost(decode(2 * n, ctx)), plain.step_cost(decode(n, ctx))
    eh_proj = gemm(n, H, 2 * H)
    # Main model: 2 query tokens per sequence through every GEMM and the LM head; the draft: one layer + LM head.
    assert mtp.parts["dense_gemm"] == pytest.approx(main.parts["dense_gemm"] + draft.parts["dense_gemm"] + eh_proj,
                                                    rel=1e-12)
    assert mtp.parts["elementwise"] == pytest.approx(main.parts["elementwise"] + draft.parts["elementwise"], rel=1e-12)
    # Verification attention: the two queries of a sequence share one read of its KV cache.
    ctx_sum = n * (ctx + 1)
    verify = roof(4 * (2 * h) * d * ctx_sum, 2 * ctx_sum * kv * d * 2 + 2 * n * (2 * h) * d * 2, EFF["attn_decode"])
    assert mtp.parts["attention"] == pytest.approx(verify + draft.parts["attention"], rel=1e-12)


def test_mtp_prefill_fills_the_draft_modules_kv():
    q = 200
    mtp = model(GQA_MTP, deployment=MTP).step_cost(prefill(1, q))
    plain = model(GQA).step_cost(prefill(1, q))
    assert mtp.parts["dense_gemm"] == pytest.approx(2 * plain.parts["dense_gemm"] + gemm(q, H, 2 * H), rel=1e-12)
    assert mtp.parts["attention"] == pytest.approx(2 * plain.parts["attention"], rel=1e-12)


def test_mtp_needs_a_model_with_an_mtp_module():
    with pytest.raises(InputError, match=r"deployment.mtp: toy_gqa has no multi-token-prediction module"):
        model(GQA, deployment=MTP)


SPARSE = {"sparse_attention": {"top_k_tokens": 1024, "indexer_heads": 4, "indexer_head_dim": 64}}
IB = 1 + 4 / 128  # fp8_block indexer keys: one fp32 scale per 128 values


def test_sparse_decode_attends_top_k_and_pays_the_indexer():
    n, ctx = 2, 5000
    ctx_sum = n * (ctx + 1)
    cost = model(GQA, deployment=SPARSE).step_cost(decode(n, ctx))
    indexer = roof(2 * 4 * 64 * ctx_sum, (ctx_sum + n * 4) * 64 * IB, EFF["attn_decode"], PEAK_FP8)
    selected = n * 1024
    attention = roof(4 * h * d * selected, 2 * selected * kv * d * 2 + 2 * n * h * d * 2, EFF["attn_decode"])
    assert cost.parts["attention"] == pytest.approx(indexer + attention, rel=1e-12)
    dense = model(GQA).step_cost(decode(n, ctx))
    assert cost.parts["attention"] < dense.parts["attention"]


def test_sparse_prefill_caps_causal_pairs():
    q = 4096
    cost = model(GQA, deployment=SPARSE).step_cost(prefill(1, q))
    pairs = q * (q + 1) // 2
    indexer = roof(2 * 4 * 64 * pairs, (q * 4 + q) * 64 * IB, EFF["attn_prefill"], PEAK_FP8)
    attention = roof(4 * h * d * min(pairs, q * 1024), 2 * q * h * d * 2 + 2 * q * kv * d * 2, EFF["attn_prefill"])
    assert cost.parts["attention"] == pytest.approx(indexer + attention, rel=1e-12)


def test_cold_experts_are_fetched_over_the_host_link():
    opts = {"experts": {"cold_fraction": 0.5, "cold_traffic_share": 0.1}}
    hot, cold = model(MOE).step_cost(decode(4, 50)), model(MOE, deployment=opts).step_cost(decode(4, 50))
    # 2 cold experts share 10% of the routings: each is picked by a top-2 token with p = 2 x 0.05.
    hits = 2 * (1 - (1 - 2 * 0.05) ** 4)
    fetch = hits * 3 * H * 512 * 2 / HOST_BW
    assert cold.parts["communication"] == pytest.approx(fetch, rel=1e-12)
    assert cold.total_s == pytest.approx(hot.total_s + fetch, rel=1e-12)


def test_eager_iterations_are_bounded_by_kernel_launches():
    host = {"host": {"cuda_graphs": False, "kernel_launch_host_s": 1e-3}}
    cost = model(GQA, step_overhead_s=0.0, deployment=host).step_cost(decode(1, 10))
    # QKV, O, decode attention, 4 elementwise kernels, gate/up, down, LM head: 10 launches of 1 ms, GPU time far less.
    assert cost.total_s == pytest.approx(10e-3, rel=1e-12)
    assert cost.parts["overhead"] == pytest.approx(10e-3 - sum(v for k, v in cost.parts.items() if k != "overhead"))
    graphed = model(GQA, step_overhead_s=2e-3).step_cost(decode(1, 10))
    assert graphed.parts["overhead"] == 2e-3
    # Above the largest captured graph an iteration runs eagerly (launch-bound only if the GPU is faster).
    limit = {"host": {"cuda_graph_max_tokens": 100, "kernel_launch_host_s": 1.0}}
    big, small = (model(GQA, deployment=limit).step_cost(prefill(1, q)) for q in (101, 100))
    assert big.parts["overhead"] > 1.0 and small.parts["overhead"] == 1e-3


def test_host_overhead_sources():
    prof = Profile("p.parquet", "toy", {"bf16": 1.0}, 1.0, {},
                   {"host_overhead": {"step_overhead_s": 5e-4, "kernel_launch_host_s": 3e-6}})
    measured = resolve_host(HostOptions(), 2e-3, prof)
    assert (measured.step_overhead_s, measured.kernel_launch_host_s) == (5e-4, 3e-6)
    assert measured.source == "profile p.parquet"
    assert resolve_host(HostOptions(), 2e-3, None).step_overhead_s == 2e-3
    mine = resolve_host(HostOptions(step_overhead_s=1e-4), 2e-3, prof)
    assert mine.step_overhead_s == 1e-4 and mine.kernel_launch_host_s == 3e-6 and mine.source == "deployment.host"


COST = CostConfig(profile="analytical", efficiency=EFF | {"attn_mla_decode": 0.6})


def _pricing(preset_or_dep, model_name="deepseek_v3", hardware="h800", tp=1, kv="bf16"):
    dep = {"preset": preset_or_dep} if isinstance(preset_or_dep, str) else preset_or_dep
    pool = PoolConfig(hardware=hardware, model=model_name, tp=tp, kv_dtype=kv)
    return pool_pricing(load_model(model_name), load_hardware(hardware), pool, COST, token_budget=4096,
                              where="t", deployment=dep)


def test_kv_handoff_moves_one_copy_of_the_latent_over_one_gpus_nic():
    prefill_pool, decode_pool = _pricing("deepseek_v3_prefill"), _pricing("deepseek_v3_decode")
    per_token = (61 + 1) * (512 + 64) * 2  # MLA latent of every layer and the MTP module, bf16
    assert prefill_pool.memory.kv_wire_bytes_per_token == per_token
    nic = 50e9 * 0.75  # h800 inter-node bandwidth x link efficiency
    assert kv_handoff_s(prefill_pool, decode_pool, 1000) == pytest.approx(5e-6 + 1000 * per_token / nic, rel=1e-12)


def test_kv_handoff_of_a_tp_pool_uses_every_gpus_nic():
    pool = _pricing(None, "llama3_70b", "h100_sxm", tp=8, kv="fp8")
    per_token = 80 * 2 * 8 * 128 * 1
    assert pool.memory.kv_wire_bytes_per_token == per_token
    assert pool.kv_transfer_s(1000) == pytest.approx(5e-6 + 1000 * per_token / (8 * 50e9 * 0.75), rel=1e-12)
    assert pool.kv_transfer_s(1000, 1e9, 0.0) == pytest.approx(1000 * per_token / 1e9, rel=1e-12)
