"""Weights, KV bytes and capacity against hand arithmetic; the DeepSeek units fit; what does not fit says why."""
from __future__ import annotations

import math

import pytest

from inferplan.errors import InputError
from inferplan.specs import load_hardware, load_model
from sim.config import CostConfig, PoolConfig
from sim.core.cost.deployment import parse_deployment
from sim.resolve import pool_pricing
from sim.core.cost.layout import build_layout
from sim.core.cost.memory import plan_memory

FP8_W = 1 + 4 / 16384          # fp8_block weight bytes (one fp32 scale per 128 x 128 block)
H100 = 85520809984             # conf/hardware/h100_sxm.yaml memory_bytes
COST = CostConfig(profile="analytical", efficiency={"gemm": 0.7, "moe_gemm": 0.55, "attn_prefill": 0.5,
                                                    "attn_decode": 0.7, "attn_mla_decode": 0.6, "elementwise": 0.6})


def _plan(model: str, hardware: str, deployment=None, *, tp=1, weights="bf16", kv="bf16", budget=8192):
    m, hw = load_model(model), load_hardware(hardware)
    dep = parse_deployment(deployment, tp=tp, weights_dtype=weights, where="test")
    return plan_memory(m, hw, dep, build_layout(m, dep, "test"), kv_dtype=kv, block_size_tokens=16,
                       gpu_memory_utilization=0.9, token_budget=budget, fixed_reserve_bytes=1.5e9)


def test_llama3_70b_bf16_on_8_h100_by_hand():
    L, Hd, h, kv, d, I, V = 80, 8192, 64, 8, 128, 28672, 128256
    layer = Hd * (h + 2 * kv) * d + h * d * Hd + 3 * Hd * I
    params = L * layer + 2 * V * Hd + (2 * L + 1) * Hd
    assert params == pytest.approx(70.55e9, rel=1e-3)          # Meta's model card: 70B (70.55 B in the checkpoint)
    weights_per_gpu = (L * layer + 2 * V * Hd) * 2 / 8 + (2 * L + 1) * Hd * 2
    kv_per_gpu = L * 2 * (kv / 8) * d * 2                       # one KV head per GPU, bf16: 40,960 B per token
    reserve = 8192 * (4 * Hd + 2 * I / 8 + h * d * 3 / 8) * 2 + 1.5e9
    free = H100 * 0.9 - weights_per_gpu - reserve
    plan = _plan("llama3_70b", "h100_sxm", tp=8)
    assert plan.weight_bytes == pytest.approx(8 * weights_per_gpu, rel=1e-12)
    assert plan.weight_bytes == pytest.approx(141.1e9, rel=1e-3)
    assert kv_per_gpu == 40960 and plan.kv_bytes_per_token == 8 * 40960
    assert plan.num_blocks == int(free // (kv_per_gpu * 16))
    assert plan.kv_capacity_bytes == plan.num_blocks * 16 * 8 * 40960
    assert plan.kv_wire_bytes_per_token == L * 2 * kv * d * 2  # one copy of every KV head
    assert plan.devices == 8 and plan.fits


def test_deepseek_v3_fp8_on_8_h200_by_hand():
    """TP8 attention and dense parts, EP8 experts (32 per GPU), MLA latent cache replicated on every TP rank."""
    Hd, V, L, moe_layers = 7168, 129280, 61, 58
    att = Hd * 1536 + 1536 * 128 * 192 + Hd * 576 + 512 * 128 * 256 + 128 * 128 * Hd
    expert = 3 * Hd * 2048
    total = L * att + 3 * 3 * Hd * 18432 + moe_layers * 257 * expert + moe_layers * 256 * Hd + 2 * V * Hd
    assert total == pytest.approx(671e9, rel=2e-3)              # DeepSeek-V3 report: 671 B parameters
    per_gpu = ((L * att + 3 * 3 * Hd * 18432 + moe_layers * expert) * FP8_W / 8      # TP-sharded
               + moe_layers * 32 * expert * FP8_W                                     # 256 / 8 whole experts
               + moe_layers * 256 * Hd * 2 + V * Hd * 2 / 8 + V * Hd * 2 / 8          # router; embedding, head
               + (2 * L + 1) * Hd * 2)                                                # norms
    plan = _plan("deepseek_v3", "h200", {"ep": 8}, tp=8, weights="fp8_block")
    assert plan.weight_bytes == pytest.approx(8 * per_gpu, rel=1e-12)
    kv_gpu = L * (512 + 64) * 2
    assert plan.kv_bytes_per_token == 8 * kv_gpu and plan.kv_wire_bytes_per_token == kv_gpu
    reserve = 8192 * (4 * Hd + 2 * max(18432, 2048 * 8) / 8 + 128 * 192 * 3 / 8) * 2 + 1.5e9
    free = load_hardware("h200").memory_bytes * 0.9 - per_gpu - reserve
    assert plan.num_blocks == int(free // (kv_gpu * 16))


@pytest.mark.parametrize("preset, devices, experts", [("deepseek_v3_prefill", 32, 9), ("deepseek_v3_decode", 144, 2)])
def test_deepseek_units_fit_their_h800s(preset, devices, experts):
    m, hw = load_model("deepseek_v3"), load_hardware("h800")
    pool = PoolConfig(hardware="h800", model="deepseek_v3")
    pricing = pool_pricing(m, hw, pool, COST, token_budget=devices * 256, where="test",
                           deployment={"preset": preset})
    mem = pricing.memory
    assert pricing.devices_per_instance == devices == mem.devices and mem.fits
    (gpu,) = mem.per_device
    expert = 3 * 7168 * 2048 * FP8_W
    mtp_layers = 1  # the MTP module is one more MoE layer: its experts sit on the same GPUs
    assert gpu.weight_bytes["experts"] == pytest.approx((58 + mtp_layers) * experts * expert, rel=1e-12)
    assert gpu.weight_bytes["shared_experts"] == pytest.approx((58 + mtp_layers) * expert, rel=1e-12)
    # Per-instance totals are the per-GPU figures times the unit's GPUs.
    assert mem.weight_bytes == pytest.approx(devices * sum(gpu.weight_bytes.values()), rel=1e-12)
    assert mem.usable_bytes == pytest.approx(devices * hw.memory_bytes * 0.9, rel=1e-12)
    assert mem.kv_bytes_per_token == gpu.kv_bytes_per_token == 62 * 576 * 2
    assert mem.num_blocks == devices * int(gpu.free_bytes // (gpu.kv_bytes_per_token * 16))
    assert mem.weight_bytes + mem.activation_reserve_bytes + mem.kv_capacity_bytes <= mem.usable_bytes


def test_a_deployment_that_does_not_fit_names_the_pool_and_what_overflows():
    m, hw = load_model("deepseek_v3"), load_hardware("h100_sxm")
    pool = PoolConfig(hardware="h100_sxm", model="deepseek_v3", tp=8)
    with pytest.raises(InputError, match=r"scenario/x: pools.decode: tp: deepseek_v3 does not fit 8 x h100_sxm "
                                         r"\(tp=8 dp=1 ep=1 pp=1; .*\): each h100_sxm needs 1[0-9.]+ GB of "
                                         r"weights \(experts"):
        pool_pricing(m, hw, pool, COST, token_budget=8192, where="scenario/x: pools.decode")
    bf16_unit = PoolConfig(hardware="h800", model="deepseek_v3")
    bf16 = {"preset": "deepseek_v3_prefill", "weights": {"attention": "bf16", "ffn": "bf16", "experts": "bf16"}}
    with pytest.raises(InputError, match=r"pools.prefill: deployment: deepseek_v3 does not fit 32 x h800 \(tp=1 "
                                         r"dp=32 ep=32 pp=1.*experts 4[0-9.]+ GB"):
        pool_pricing(m, load_hardware("h800"), bf16_unit, COST, token_budget=8192, where="pools.prefill",
                     deployment=bf16)


def test_cold_experts_trade_gpu_memory_for_host_memory():
    hot = _plan("mixtral_8x7b", "h100_sxm", tp=2)
    cold = _plan("mixtral_8x7b", "h100_sxm", {"experts": {"cold_fraction": 0.25}}, tp=2)
    expert = 3 * 4096 * 14336 * 2
    moved = 32 * 2 * expert  # 2 of 8 experts in each of 32 layers
    assert hot.weight_bytes - cold.weight_bytes == pytest.approx(moved, rel=1e-9)
    assert cold.host_weight_bytes == pytest.approx(moved, rel=1e-9)
    assert cold.num_blocks > hot.num_blocks


def test_fp8_kv_doubles_the_tokens_that_fit():
    bf16, fp8 = _plan("llama3_70b", "h100_sxm", tp=8), _plan("llama3_70b", "h100_sxm", tp=8, kv="fp8")
    assert fp8.kv_bytes_per_token == bf16.kv_bytes_per_token / 2
    assert fp8.num_blocks in (2 * bf16.num_blocks, 2 * bf16.num_blocks + 1)


def test_dp_ranks_multiply_capacity_and_devices():
    one, four = _plan("llama3_8b", "h100_sxm", budget=2048), _plan("llama3_8b", "h100_sxm", {"dp": 4}, budget=8192)
    assert four.devices == 4 and four.num_blocks == 4 * one.num_blocks and four.blocks_per_rank == one.num_blocks
    assert four.weight_bytes == pytest.approx(4 * one.weight_bytes)
    assert math.isclose(four.kv_bytes_per_token, one.kv_bytes_per_token)
