"""The KV cache each engine gives itself, as its own code computes it (inferplan/config/engine_memory.py): SGLang's
`mem_fraction_static` rules by version (shared/engine-defaults/sglang.csv), its fraction holding weights and KV only,
and vLLM V1's profile-run sampler peak over `min(max_num_seqs, max_num_batched_tokens)` x vocabulary logits."""
from __future__ import annotations

import pytest

from inferplan.config.engine_memory import (SGLANG_0_5_1, SGLANG_0_5_6, sampler_peak_bytes,
                                            sglang_mem_fraction_static)
from inferplan.errors import InputError
from inferplan.specs import load_hardware, load_model
from sim.core.cost.deployment import parse_deployment
from sim.core.cost.layout import build_layout
from sim.core.cost.memory import activation_reserve_bytes, plan_memory
from tests.sim.helpers import run_config

H100 = 85520809984    # conf/hardware/h100_sxm.yaml: 81,559 MiB
H200 = 150754820096   # conf/hardware/h200.yaml: 143,771 MiB
POOL = "scenario.pools.main"


def _fraction(reserved_mib: float, gpu_mib: float) -> float:
    return round((gpu_mib - reserved_mib) / gpu_mib, 3)


def test_sglang_0_5_1_reserves_by_device_tier():
    # <90 GiB: (9.5 + tp x pp / 2) GiB; <160 GiB: (12 + tp x pp / 2) GiB; + 4 GiB with DP attention.
    assert sglang_mem_fraction_static(SGLANG_0_5_1, H100, 4) == _fraction((9.5 + 2) * 1024, 81559) == 0.856
    assert sglang_mem_fraction_static(SGLANG_0_5_1, H200, 8) == _fraction((12 + 4) * 1024, 143771)
    assert sglang_mem_fraction_static(SGLANG_0_5_1, H200, 8, dp_attention_size=8) == \
        _fraction((12 + 4 + 4) * 1024, 143771)
    assert sglang_mem_fraction_static(SGLANG_0_5_1, H100, 2, pp_size=2) == _fraction((9.5 + 2) * 1024, 81559)


def test_sglang_0_5_6_reserves_from_chunk_and_graph_sizes():
    # 512 + 1.5 x chunk (8192 on 60-160 GiB) + 2 x cuda_graph_max_bs (256 below tp 4, 512 from it) + tp x pp / 8 GiB.
    assert sglang_mem_fraction_static(SGLANG_0_5_6, H100, 1) == _fraction(512 + 12288 + 512 + 128, 81559) == 0.835
    assert sglang_mem_fraction_static(SGLANG_0_5_6, H200, 8) == _fraction(512 + 12288 + 1024 + 1024, 143771)
    dp = 512 + 12288 + 1024 + 1024 + 512 * 8 * 3 + 512 * 8 * 1.5  # DP attention: graph_bs x dp x (3 + 1.5 above 300)
    assert sglang_mem_fraction_static(SGLANG_0_5_6, H200, 8, dp_attention_size=8) == _fraction(dp, 143771)
    # at least 10 GiB kept out above 60 GiB (with the default 8,192-token chunk the sum is already above it)
    assert sglang_mem_fraction_static(SGLANG_0_5_6, 80 * 2**30, 1) <= _fraction(10 * 1024, 80 * 1024)
    # a 24 GiB device: chunk 2,048, graphs up to 24 below tp 4 (no floor below 60 GiB)
    assert sglang_mem_fraction_static(SGLANG_0_5_6, 24 * 2**30, 1) == _fraction(512 + 3072 + 48 + 128, 24 * 1024)
    with pytest.raises(ValueError, match="unknown mem_fraction_rule"):
        sglang_mem_fraction_static("sglang_0_3", H100, 1)


def test_sampler_peak_is_bytes_per_logit_over_the_dummy_requests():
    assert sampler_peak_bytes(14, 1024, 8192, 200064) == 14 * 200064 * 1024
    assert sampler_peak_bytes(28, 1024, 512, 1000) == 28 * 1000 * 512      # fewer tokens than sequences
    assert sampler_peak_bytes(0, 1024, 8192, 200064) == 0.0
    assert sampler_peak_bytes(14, None, 8192, 200064) == 0.0


def _plan(**kw):
    m, hw = load_model("qwen3_32b"), load_hardware("h100_sxm")
    dep = parse_deployment(None, tp=2, weights_dtype="bf16", where="test")
    lay = build_layout(m, dep, "test")
    plan = plan_memory(m, hw, dep, lay, kv_dtype="bf16", block_size_tokens=16, gpu_memory_utilization=0.9,
                       token_budget=8192, fixed_reserve_bytes=1.5e9, **kw)
    return plan, activation_reserve_bytes(m, lay, 8192)


def test_the_reserve_is_the_larger_of_forward_and_sampler_or_none_under_a_static_fraction():
    base, forward = _plan()
    sampled, _ = _plan(sampler_peak_bytes=4e9)
    small, _ = _plan(sampler_peak_bytes=forward / 2)
    static, _ = _plan(activations_in_usable=False)
    assert forward < 4e9
    assert sampled.activation_reserve_bytes == pytest.approx(2 * (4e9 + 1.5e9))
    assert small.activation_reserve_bytes == base.activation_reserve_bytes == pytest.approx(2 * (forward + 1.5e9))
    assert static.activation_reserve_bytes == pytest.approx(2 * 1.5e9)
    assert sampled.num_blocks < base.num_blocks < static.num_blocks


def test_presets_apply_their_engines_memory_rules():
    sglang = run_config("engine=sglang_v059_serve", f"{POOL}.model=qwen3_32b", f"{POOL}.hardware=h200",
                        f"++{POOL}.tp=8").setups["main"].pool
    assert sglang.gpu_memory_utilization == sglang_mem_fraction_static(SGLANG_0_5_6, H200, 8) == 0.897
    assert sglang.memory_accounting == "static_fraction" and sglang.sampler_peak_bytes == 0.0
    old = run_config("engine=sglang_v05_serve", f"{POOL}.model=qwen3_32b", f"{POOL}.hardware=h100_sxm",
                     f"++{POOL}.tp=4").setups["main"].pool
    assert old.gpu_memory_utilization == 0.856
    vllm = run_config("engine=vllm_v1_async_serve", f"{POOL}.model=qwen3_32b",
                      f"{POOL}.hardware=h100_sxm").setups["main"].pool
    vocab = load_model("qwen3_32b").vocab_size
    assert vllm.gpu_memory_utilization == 0.9 and vllm.memory_accounting == "profiled"
    assert vllm.sampler_peak_bytes == 14 * vocab * 1024
    assert run_config("engine=vllm_v1_serve").setups["main"].pool.sampler_peak_bytes == \
        28 * load_model(run_config("engine=vllm_v1_serve").setups["main"].pool.model).vocab_size * 1024


def test_bad_memory_keys_are_refused_in_one_line():
    with pytest.raises(InputError, match="conf/engine/sglang_v059_serve.yaml: mem_fraction_rule: 'sglang_9'"):
        run_config("engine=sglang_v059_serve", "engine.mem_fraction_rule=sglang_9")
    with pytest.raises(InputError, match="memory_accounting: 'half'"):
        run_config("engine=vllm_v1_serve", "++engine.memory_accounting=half")
    with pytest.raises(InputError, match="pools.main.memory_accounting"):
        run_config(f"++{POOL}.memory_accounting=half")


def test_the_summary_says_where_each_pools_kv_capacity_comes_from():
    from types import SimpleNamespace

    from sim.results.kv_memory import kv_memory
    ran = SimpleNamespace(kv_blocks_per_instance=1000, block_size_tokens=16)
    sglang = kv_memory(run_config("engine=sglang_v059_serve").setups["main"], ran)
    assert sglang["tokens_per_instance"] == 16000 and sglang["accounting"] == "static_fraction"
    assert sglang["fraction_rule"] == "sglang_0_5_6" and sglang["gpu_memory_utilization"] == 0.835
    assert "SGLang 0.5.6+'s mem_fraction_static rule" in sglang["basis"] and "outside" in sglang["basis"]
    vllm = kv_memory(run_config("engine=vllm_v1_async_serve").setups["main"], ran)
    assert vllm["fraction_rule"] is None and vllm["sampler_peak_bytes_per_device"] > 0
    assert "sampler, " in vllm["basis"] and "GB per device" in vllm["basis"]
    generic = kv_memory(run_config().setups["main"], ran)
    assert "the pool's gpu_memory_utilization" in generic["basis"] and "sampler" not in generic["basis"]
    assert "0.9 of what is left" in kv_memory(run_config("engine=trtllm").setups["main"], ran)["basis"]


def test_sglang_chunk_and_graph_sizes_follow_the_device():
    from inferplan.config.device_defaults import chunk_tokens, sglang_graph_sizes
    assert [chunk_tokens(SGLANG_0_5_6, gib * 2**30) for gib in (24, 48, 80, 141, 180)] == [2048, 4096, 8192, 8192,
                                                                                              16384]
    assert chunk_tokens(SGLANG_0_5_1, 48 * 2**30) == 8192   # 0.5.1 had no 4096 tier
    with pytest.raises(ValueError, match="unknown device_rule"):
        chunk_tokens("sglang_0_3", H100)
    # 0.5.9 (server_args.py _generate_cuda_graph_batch_sizes): 12 captured, 256 below TP 4, 512 from it
    h100 = 81559
    assert sglang_graph_sizes(SGLANG_0_5_6, h100, 2)[:7] == (1, 2, 4, 8, 12, 16, 24)
    assert max(sglang_graph_sizes(SGLANG_0_5_6, h100, 2)) == 256
    assert sglang_graph_sizes(SGLANG_0_5_6, h100, 8)[-4:] == (464, 480, 496, 512)
    # 0.5.1 (cuda_graph_runner.py get_batch_sizes_to_capture): [1, 2, 4, 8] + 16..160 on an H100, to 256 on an H200
    assert sglang_graph_sizes(SGLANG_0_5_1, h100, 8) == (1, 2, 4, 8, *range(16, 161, 8))
    assert sglang_graph_sizes(SGLANG_0_5_1, 143771, 8)[-1] == 256
    assert sglang_graph_sizes(SGLANG_0_5_1, 24 * 1024, 1) == (1, 2, 4, 8)
    for hardware, tokens, top in (("h200", 8192, 512), ("b200", 16384, 512), ("l40s", 4096, 160)):
        run = run_config("engine=sglang_v059_serve", f"{POOL}.hardware={hardware}", f"++{POOL}.tp=4")
        setup = run.setups["main"]
        assert setup.engine.max_num_batched_tokens == setup.token_budget == tokens, hardware
        assert max(setup.engine.cuda_graph_sizes) == top, hardware
        assert "device_rule sglang_0_5_6" in setup.scheduler.setting("max_num_batched_tokens").source
    # vLLM's budget and graphs are its preset's on every device
    vllm = run_config("engine=vllm_v1_async_serve", f"{POOL}.hardware=b200").setups["main"]
    assert vllm.token_budget == 8192 and max(vllm.engine.cuda_graph_sizes) == 512
