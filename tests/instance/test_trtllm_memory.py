"""TensorRT-LLM's KV memory: `free_gpu_memory_fraction` 0.9 of the memory left after weights and activations
(KvCacheConfig docs), not a fraction of all memory; the preset resolves to it."""
from __future__ import annotations

import pytest

from inferplan.specs import load_hardware, load_model
from sim.core.cost.deployment import parse_deployment
from sim.core.cost.layout import build_layout
from sim.core.cost.memory import plan_memory
from sim.resolve import ENGINE_DIR, engine_preset

H100 = 85520809984  # conf/hardware/h100_sxm.yaml memory_bytes


def _plan(util: float, free_fraction: float):
    m, hw = load_model("llama3_70b"), load_hardware("h100_sxm")
    dep = parse_deployment(None, tp=8, weights_dtype="bf16", where="test")
    return plan_memory(m, hw, dep, build_layout(m, dep, "test"), kv_dtype="bf16", block_size_tokens=32,
                       gpu_memory_utilization=util, token_budget=8192, fixed_reserve_bytes=1.5e9,
                       kv_free_fraction=free_fraction)


def test_kv_takes_its_fraction_of_what_weights_and_activations_leave():
    # Same weights and reserve per GPU as tests/cost/test_memory_plan.py (Llama-3-70B bf16, tp 8):
    L, Hd, h, kv, d, I, V = 80, 8192, 64, 8, 128, 28672, 128256
    layer = Hd * (h + 2 * kv) * d + h * d * Hd + 3 * Hd * I
    weights_per_gpu = (L * layer + 2 * V * Hd) * 2 / 8 + (2 * L + 1) * Hd * 2
    reserve = 8192 * (4 * Hd + 2 * I / 8 + h * d * 3 / 8) * 2 + 1.5e9
    free = (H100 - weights_per_gpu - reserve) * 0.9
    plan = _plan(1.0, 0.9)
    assert plan.num_blocks == int(free // (40960 * 32))
    # 0.9 of free memory holds more KV than 0.9 of all memory (vLLM's rule) would: the weights are not taxed.
    assert plan.num_blocks > _plan(0.9, 1.0).num_blocks


def test_trtllm_preset_uses_the_free_memory_fraction():
    import yaml
    spec = engine_preset("trtllm", None, "test")
    assert spec.kv_free_memory_fraction == 0.9 and spec.gpu_memory_utilization == 1.0
    assert spec.kv_free_fraction() == 0.9 and spec.memory_settings(4, 0.5, 16)[0] == 1.0
    assert "kv_free_memory_fraction" not in (yaml.safe_load((ENGINE_DIR / "vllm_v0.yaml").read_text()) or {})
    assert engine_preset("vllm_v0", None, "test").kv_free_fraction() == 1.0
