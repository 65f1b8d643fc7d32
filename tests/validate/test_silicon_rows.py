"""How the matrix reads a row's client concurrency, its data-parallel-attention encoding and an unversioned engine."""
from __future__ import annotations

import dataclasses

import pytest

from sim.validate.silicon.support import RowPlan, plan_row
from sim.validate.silicon.table import SiliconRow, client_concurrency

ROW = SiliconRow(id="r", engine="vllm", engine_version="0.18.0", model_path="MiniMaxAI/MiniMax-M2.5",
                 system="h100_sxm", precision="fp8", gemm_quant_mode="fp8", moe_quant_mode="fp8", mode="agg",
                 isl_tokens=1024, osl_tokens=1024, clients=4, tp=4, pp=1, attention_dp=4, moe_tp=1, moe_ep=16,
                 disagg_workers=(None, None), measured_ttft_s=0.1, measured_tpot_s=0.01, batch_size=1)


@pytest.mark.parametrize("source, batch_size, clients", [
    ("source_file=2026-04-06.csv; model=MiniMax-M2.5; silicon_concurrency=4; measured=2026-03-28", 1, 4),
    ("db-dump/2026-04-27; config_id=606; silicon_concurrency=16; m", 16, 16),
    ("source_file=/data/h100_sxm/vllm/0.12.0/run.csv", 8, 8),   # no concurrency recorded: the column's
    ("", None, None),
    ("x_silicon_concurrency=9", 3, 3),                            # not the key itself
])
def test_the_client_concurrency_is_the_sources_else_the_column(source, batch_size, clients):
    assert client_concurrency(source, batch_size) == clients


def test_the_n_by_n_expert_encoding_is_tp_n_ep_n_as_its_twin_records_read():
    """tp_size 4, attention_dp_size 4, moe_ep_size 16 is the TP 4 EP 4 run recorded elsewhere in the file as
    tp_size 4, attention_dp_size 1, moe_ep_size 4 (the same TTFT and TPOT): 4 GPUs, attention not data-parallel."""
    p = plan_row(ROW)
    twin = plan_row(dataclasses.replace(ROW, attention_dp=1, moe_ep=4))
    assert isinstance(p, RowPlan) and isinstance(twin, RowPlan)
    assert (p.tp, p.deployment) == (twin.tp, twin.deployment) == (4, {"ep": 4})
    assert any("no data-parallel attention" in a for a in p.assumptions)


@pytest.mark.parametrize("change, tp, deployment", [
    ({"tp": 2, "attention_dp": 4, "moe_ep": 8}, 2, {"dp": 4, "ep": 8}),     # tp != dp: as written
    ({"tp": 4, "attention_dp": 4, "moe_ep": 4}, 4, None),                   # ep != tp x dp: not this encoding
    ({"tp": 8, "attention_dp": 1, "moe_ep": 8}, 8, {"ep": 8}),
])
def test_other_parallel_layouts_are_taken_as_written(change, tp, deployment):
    p = plan_row(dataclasses.replace(ROW, **change))
    if deployment is None:
        assert not isinstance(p, RowPlan) and p.reason == "parallelism"
    else:
        assert isinstance(p, RowPlan) and (p.tp, p.deployment) == (tp, deployment)
        assert not any("no data-parallel attention" in a for a in p.assumptions)


@pytest.mark.parametrize("version", ["", "gpt-oss-dev"])
def test_an_unversioned_tensorrt_llm_row_runs_the_newest_serving_preset(version):
    row = dataclasses.replace(ROW, engine="trtllm", engine_version=version, model_path="Qwen/Qwen3-32B", tp=2,
                              attention_dp=1, moe_ep=1)
    p = plan_row(row)
    assert isinstance(p, RowPlan) and p.engine == "trtllm_v1_serve"
    assert any("newest trtllm preset" in a for a in p.assumptions)


def test_tp_size_written_as_moe_tp_times_moe_ep_is_the_tp_n_ep_n_the_id_names():
    row = dataclasses.replace(ROW, id="2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x1024_c4_tp4_ep4_987",
                              engine="trtllm", engine_version="", model_path="openai/gpt-oss-120b",
                              system="h200_sxm", precision="fp4", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4",
                              tp=16, attention_dp=1, moe_tp=4, moe_ep=4)
    p = plan_row(row)
    assert isinstance(p, RowPlan) and p.tp == 4 and p.deployment["ep"] == 4
    assert any("TP 4 with the experts EP 4, 4 GPUs" in a for a in p.assumptions)
    # the same columns in an id that names no split, TP 16 over a system of 8-GPU nodes (single-node runs): the
    # same TP 4 EP 4 (config 615's rows are twins of the tp4_ep4 ones to the microsecond)
    unnamed = plan_row(dataclasses.replace(row, id="qwen3_5_b200_sglang_fp8_agg_8192x1024_c64_cfg615"))
    assert isinstance(unnamed, RowPlan) and (unnamed.tp, unnamed.deployment["ep"]) == (4, 4)
    assert any("TP 16 would span 2 nodes of h200_sxm" in a for a in unnamed.assumptions)
    # within a node (TP 4 as EP 2 x TP 2, id naming no split): the literal mix
    small = plan_row(dataclasses.replace(row, id="x_1", tp=4, moe_tp=2, moe_ep=2))
    assert isinstance(small, RowPlan) and (small.tp, small.deployment["ep"]) == (4, 2)
    # an id that names no such deployment keeps the columns: a MoE TP 2 x EP 2 mix inside TP 4
    mix = plan_row(dataclasses.replace(row, id="gpt_oss_h100_trtllm_agg_4000x1000_c320_tp4_epnone_4", tp=4,
                                       moe_tp=2, moe_ep=2))
    assert isinstance(mix, RowPlan) and (mix.tp, mix.deployment["ep"]) == (4, 2)
    # an id naming another split than the columns' N: not read as it (the literal columns again)
    other = plan_row(dataclasses.replace(row, id="x_c4_tp2_ep2_9"))
    assert isinstance(other, RowPlan) and (other.tp, other.deployment["ep"]) == (16, 4)
    # columns whose moe_tp x moe_ep is not the devices, or a mix under attention DP: refused, named
    for bad in ({"tp": 4, "moe_tp": 1, "moe_ep": 2}, {"tp": 2, "attention_dp": 2, "moe_tp": 2, "moe_ep": 2}):
        refused = plan_row(dataclasses.replace(row, id="x_1", **bad))
        assert not isinstance(refused, RowPlan) and refused.reason == "parallelism"


def test_attention_dp_written_as_moe_tp_times_moe_ep_is_the_dp_n_ep_n_its_twin_records():
    """2026-04-06 gpt-oss-120b TensorRT-LLM B200 rows: `attention_dp_size` 4, `moe_tp_size` 2, `moe_ep_size` 2, id
    `tp2_ep2`; the 2026-03-25 file records the same run (identical TTFT and TPOT) as attention DP 2, EP 2."""
    row = dataclasses.replace(ROW, id="2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c256_tp2_ep2_1741",
                              engine="trtllm", engine_version="", model_path="openai/gpt-oss-120b",
                              system="b200_sxm", precision="fp4", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4",
                              clients=256, tp=1, attention_dp=4, moe_tp=2, moe_ep=2)
    p = plan_row(row)
    assert isinstance(p, RowPlan) and (p.tp, p.deployment["dp"], p.deployment["ep"]) == (1, 2, 2)
    assert any("attention DP 2 with the experts EP 2" in a for a in p.assumptions)


def test_tensorrt_llm_per_tensor_fp8_rows_run_the_modelopt_checkpoints_fp8_kv_cache():
    """TensorRT-LLM serves per-tensor FP8 from a ModelOpt checkpoint whose KV cache is FP8 (KvCacheConfig.dtype
    auto follows it); vLLM's auto is the model dtype; the override reaches the pool only where it differs."""
    from sim.validate.silicon.simulate_row import overrides
    trt = plan_row(dataclasses.replace(ROW, engine="trtllm", engine_version="1.0.0rc3", model_path="Qwen/Qwen3-32B",
                                       tp=2, attention_dp=1, moe_ep=1))
    vllm = plan_row(dataclasses.replace(ROW, model_path="Qwen/Qwen3-32B", tp=2, attention_dp=1, moe_ep=1))
    bf16 = plan_row(dataclasses.replace(ROW, engine="trtllm", engine_version="1.0.0rc3", model_path="Qwen/Qwen3-32B",
                                        tp=2, attention_dp=1, moe_ep=1, precision="", gemm_quant_mode="",
                                        moe_quant_mode=""))
    assert isinstance(trt, RowPlan) and isinstance(vllm, RowPlan) and isinstance(bf16, RowPlan)
    assert (trt.weights_dtype, trt.kv_dtype) == ("fp8", "fp8")
    assert any("kv_cache_quant_algo" in a for a in trt.assumptions)
    assert (vllm.weights_dtype, vllm.kv_dtype) == ("fp8", "bf16") and bf16.kv_dtype == "bf16"
    assert "++scenario.pools.main.kv_dtype=fp8" in overrides(trt)
    assert not any("kv_dtype" in o for o in overrides(vllm) + overrides(bf16))


DISAGG = "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c4_cfg759"


def test_a_disaggregated_row_is_a_prefill_pool_handing_each_request_to_a_decode_pool():
    """The row's 1 prefill worker (TP 1, attention DP 4, EP 4) and 4 decode workers (TP 8, EP 8): two pools, the
    clients sending to the prefill one; every request finishes in the decode pool."""
    from sim.validate.silicon.simulate_row import overrides, simulate_plan
    from sim.validate.silicon.table import read_table
    row = next(r for r in read_table() if r.id == DISAGG)
    p = plan_row(row)
    assert isinstance(p, RowPlan) and p.decode is not None
    assert (p.instances, p.tp, p.deployment) == (1, 1, {"dp": 4, "ep": 4})
    assert (p.decode.instances, p.decode.tp, p.decode.deployment) == (4, 8, {"ep": 8})
    assert any(a.startswith("disaggregated: 1 prefill worker(s) of TP 1 x DP 4, EP 4") for a in p.assumptions)
    ov = overrides(p)
    assert "++scenario.pools.main.role=prefill" in ov and "++scenario.pools.main.decode_pool=decode" in ov
    assert "++scenario.pools.decode={hardware:gb200,model:kimi_k2_5,tp:8,weights_dtype:nvfp4,role:decode," \
           "instances:4,deployment:{ep:8}}" in ov
    result = simulate_plan(p, rounds=2)
    assert result["completed"] == result["requests"] == 8 and result["sim_tpot_p50_s"] > 0


def test_a_disaggregated_phase_the_deployment_cannot_express_is_named():
    from sim.validate.silicon.table import read_table
    row = next(r for r in read_table() if r.id == DISAGG)
    mixed = plan_row(dataclasses.replace(row, disagg_split=(row.disagg_split[0], (8, 1, 1, 1, 4))))
    assert not isinstance(mixed, RowPlan) and mixed.reason == "parallelism"
    assert mixed.detail.startswith("decode: moe_tp 1 x moe_ep 4")
    mix = plan_row(dataclasses.replace(row, disagg_split=(row.disagg_split[0], (8, 1, 1, 2, 4))))
    assert isinstance(mix, RowPlan) and mix.decode is not None and mix.decode.deployment == {"ep": 4}
