"""The matrix's error metrics and row planning on hand-made numbers and rows (no simulation)."""
from __future__ import annotations

import dataclasses
import math

import pytest

from sim.validate.silicon.metrics import band, error_pct, grouped, partition, summarize, summary
from sim.validate.silicon.simulate_row import overrides
from sim.validate.silicon.support import REASONS, RowPlan, Unsupported, plan_row
from sim.validate.silicon.table import SiliconRow


def test_error_pct_is_signed_percent_of_measured():
    assert error_pct(80.0, 100.0) == pytest.approx(-20.0)
    assert error_pct(0.15, 0.1) == pytest.approx(50.0)
    assert math.isnan(error_pct(1.0, 0.0))
    assert math.isnan(error_pct(float("nan"), 1.0))


@pytest.mark.parametrize("clients,label", [(1, "1-4"), (4, "1-4"), (5, "5-32"), (32, "5-32"), (33, "33-128"),
                                           (128, "33-128"), (129, ">128"), (512, ">128")])
def test_concurrency_bands(clients, label):
    assert band(clients) == label


def test_band_below_one_client_is_an_error():
    with pytest.raises(ValueError, match="below 1"):
        band(0)


def test_summary_median_abs_mape_and_bias():
    s = summary([-10.0, 20.0, -30.0, float("nan")])  # NaN (no simulated value) is left out
    assert s == {"rows": 3, "median_abs_pct": pytest.approx(20.0), "mape_pct": pytest.approx(20.0),
                 "bias_pct": pytest.approx(-10.0)}
    assert summary([])["rows"] == 0 and math.isnan(summary([])["bias_pct"])


def test_summarize_and_group_per_partition():
    recs = [{"system": "h100_sxm", "engine": "vllm", "model": "M", "shape": "1024x1024", "ttft_error_pct": -80.0,
             "tpot_error_pct": 10.0},
            {"system": "h100_sxm", "engine": "vllm", "model": "M", "shape": "1024x1024", "ttft_error_pct": -60.0,
             "tpot_error_pct": -30.0},
            {"system": "h200_sxm", "engine": "sglang", "model": "M", "shape": "8192x1024", "ttft_error_pct": 40.0,
             "tpot_error_pct": 5.0}]
    g = grouped(recs, partition)
    assert list(g) == ["h100_sxm vllm M 1024x1024", "h200_sxm sglang M 8192x1024"]
    first = g["h100_sxm vllm M 1024x1024"]
    assert first["rows"] == 2
    assert first["ttft"]["median_abs_pct"] == pytest.approx(70.0) and first["ttft"]["bias_pct"] == pytest.approx(-70.0)
    assert first["tpot"]["mape_pct"] == pytest.approx(20.0) and first["tpot"]["bias_pct"] == pytest.approx(-10.0)
    assert summarize(recs)["ttft"]["median_abs_pct"] == pytest.approx(60.0)
    # a disaggregated deployment's rows are a partition of their own (an aggregated row's record says "agg")
    assert partition(recs[0] | {"mode": "disagg"}) == "h100_sxm vllm M 1024x1024 disagg"
    assert partition(recs[0] | {"mode": "agg"}) == "h100_sxm vllm M 1024x1024"


ROW = SiliconRow(id="r", engine="vllm", engine_version="0.18.0", model_path="Qwen/Qwen3-32B", system="h100_sxm",
                 precision="fp8", gemm_quant_mode="fp8", moe_quant_mode="fp8", mode="agg", isl_tokens=1024,
                 osl_tokens=1024, clients=8, tp=2, pp=1, attention_dp=1, moe_tp=1, moe_ep=1,
                 disagg_workers=(None, None), measured_ttft_s=0.1, measured_tpot_s=0.01)


def test_plan_of_an_expressible_row():
    p = plan_row(ROW)
    assert isinstance(p, RowPlan)
    assert (p.hardware, p.model, p.engine, p.tp, p.weights_dtype, p.deployment) == \
        ("h100_sxm", "qwen3_32b", "vllm_v1_async_serve", 2, "fp8", {})  # (0.18: async scheduling on by default)
    assert plan_row(dataclasses.replace(ROW, engine_version="0.12.0")).engine == "vllm_v1_serve"
    assert plan_row(dataclasses.replace(ROW, engine_version="0.14.0")).engine == "vllm_v1_async_serve"
    # SGLang: 0.5.0-0.5.8 and 0.5.9+ are two serving presets (one front-end fit each); a build named otherwise
    # (glm5-hopper, nightly-dev) takes the newest.
    for version, preset in (("0.5.1.post1", "sglang_v05_serve"), ("0.5.8.post1", "sglang_v05_serve"),
                            ("0.5.9", "sglang_v059_serve"), ("0.5.10.post1", "sglang_v059_serve"),
                            ("glm5-hopper", "sglang_v059_serve"), ("nightly-dev", "sglang_v059_serve")):
        assert plan_row(dataclasses.replace(ROW, engine="sglang", engine_version=version)).engine == preset
    h200 = plan_row(dataclasses.replace(ROW, system="h200_sxm", precision="", gemm_quant_mode="", moe_quant_mode=""))
    assert h200.hardware == "h200" and h200.weights_dtype == "bf16"
    assert any("bf16" in a for a in h200.assumptions)


def test_a_version_sets_the_preset_keys_it_differs_in():
    """vLLM 0.14-0.16 share vllm_v1_async_serve with 0.17+, but their profile-run sampler sorts the vocabulary
    (28 bytes per logit, not the preset's 14): the row's plan carries its version's value into the overrides."""
    for version, keys in (("0.16.0", (("sampler_bytes_per_logit", 28.0),)), ("0.14.1", (("sampler_bytes_per_logit",
                          28.0),)), ("0.17.0", ()), ("0.18.0", ()), ("0.12.0", ()), ("", ())):
        p = plan_row(dataclasses.replace(ROW, engine_version=version))
        assert isinstance(p, RowPlan) and p.engine_keys == keys, version
    plan = plan_row(dataclasses.replace(ROW, engine_version="0.16.0"))
    assert "++engine.sampler_bytes_per_logit=28.0" in overrides(plan)
    assert any("sampler_bytes_per_logit 28" in a for a in plan.assumptions)
    # a fitted front-end key given beside it is kept; the version's key stays
    both = overrides(plan, engine={"frontend_per_request_s": 0.1})
    assert "++engine.frontend_per_request_s=0.1" in both and "++engine.sampler_bytes_per_logit=28.0" in both
    assert plan_row(dataclasses.replace(ROW, engine="sglang", engine_version="0.5.1.post1")).engine_keys == ()


def test_sglang_0_5_6_to_0_5_8_rows_size_memory_by_their_versions_rule():
    """sglang_v05_serve serves 0.5.0-0.5.8 with 0.5.1's tiered memory rule; 0.5.6 changed `mem_fraction_static`
    (and the chunk and graph sizes it reads) to the chunk-and-graph rule 0.5.9 has: a 0.5.6-0.5.8 row runs with it,
    through overrides a plain `python -m sim` composes (H100 TP 2: 0.868 -> 0.834)."""
    from sim.compose import compose_config
    from sim.config import load_run_config

    new = (("device_rule", "sglang_0_5_6"), ("mem_fraction_rule", "sglang_0_5_6"))
    fractions = {}
    for version, keys in (("0.5.1.post1", ()), ("0.5.5", ()), ("0.5.6.post2", new), ("0.5.8.post1", new)):
        plan = plan_row(dataclasses.replace(ROW, engine="sglang", engine_version=version))
        assert isinstance(plan, RowPlan) and plan.engine == "sglang_v05_serve" and plan.engine_keys == keys, version
        run = load_run_config(compose_config(overrides(plan)))
        fractions[version] = run.setups["main"].pool.gpu_memory_utilization
    assert fractions["0.5.1.post1"] == fractions["0.5.5"] == 0.868
    assert fractions["0.5.6.post2"] == fractions["0.5.8.post1"] == 0.834
    assert plan_row(dataclasses.replace(ROW, engine="sglang", engine_version="0.5.9")).engine_keys == ()
    plan = plan_row(dataclasses.replace(ROW, engine="sglang", engine_version="0.5.8.post1"))
    assert any("mem_fraction_rule sglang_0_5_6" in a for a in plan.assumptions)


@pytest.mark.parametrize("change,reason", [
    ({"system": "x9000_sxm"}, "hardware"),
    ({"mode": "disagg", "clients": None}, "disagg_no_workers"),
    ({"mode": "disagg", "clients": None, "disagg_workers": (2, 1)}, "disagg_no_concurrency"),
    ({"clients": None}, "no_concurrency"),
    ({"model_path": "openai/gpt-oss-20b", "gemm_quant_mode": "nvfp4"}, "architecture"),
    ({"model_path": "openai/gpt-oss-20b"}, "architecture"),
    ({"model_path": "example/Unknown-7B"}, "model"),
    ({"model_path": "nvidia/Qwen3-32B-NVFP4", "precision": "fp4", "gemm_quant_mode": "nvfp4"}, "fp4_units"),
    ({"model_path": "meta-llama/Llama-3.1-70B-Instruct", "system": "b200_sxm", "precision": "fp4",
      "gemm_quant_mode": "nvfp4"}, "fp4_format"),
    ({"model_path": "MiniMaxAI/MiniMax-M2.5", "tp": 4, "moe_tp": 1, "moe_ep": 2}, "parallelism"),
    ({"model_path": "MiniMaxAI/MiniMax-M2.5", "tp": 2, "attention_dp": 2, "moe_tp": 2, "moe_ep": 2}, "parallelism"),
])
def test_unsupported_rows_name_their_reason(change, reason):
    p = plan_row(dataclasses.replace(ROW, **change))
    assert isinstance(p, Unsupported) and p.reason == reason


DYNAMO = "source_file=x/trtllm/1.3.0rc1/m.csv; gtl_job_id=1; dynamo_version=0.9.0"


def test_a_dynamo_row_runs_its_workers_behind_the_router():
    """Through Dynamo, `batch_size` is each worker's concurrency and the source's `silicon_concurrency` the
    client's: silicon_concurrency 192 over batch_size 48 is four instances with 192 clients among them."""
    row = dataclasses.replace(ROW, engine="trtllm", engine_version="1.3.0rc1", clients=192, batch_size=48,
                              source=DYNAMO + "; silicon_concurrency=192")
    p = plan_row(row)
    assert isinstance(p, RowPlan) and (p.instances, p.row.clients) == (4, 192)
    assert any("4 workers of 48 clients" in a for a in p.assumptions)
    assert plan_row(dataclasses.replace(row, clients=48, source=DYNAMO + "; silicon_concurrency=48")).instances == 1
    assert plan_row(dataclasses.replace(row, source="source_file=x.csv; silicon_concurrency=192")).instances == 1
    data_parallel = plan_row(dataclasses.replace(row, model_path="MiniMaxAI/MiniMax-M2.5", attention_dp=2,
                                                 moe_ep=8, tp=4, batch_size=24))
    assert isinstance(data_parallel, RowPlan) and data_parallel.instances == 4  # 192 / (24 x attention DP 2)


@pytest.mark.parametrize("source,clients", [(DYNAMO, 64), (DYNAMO + "; silicon_concurrency=100", 100)])
def test_a_dynamo_row_without_its_worker_count_is_refused(source, clients):
    """No `silicon_concurrency` (batch_size may be the total or a worker's), or one that is not a whole number of
    workers: counted under `replicas`, never guessed."""
    p = plan_row(dataclasses.replace(ROW, clients=clients, batch_size=64 if clients == 64 else 48, source=source))
    assert isinstance(p, Unsupported) and p.reason == "replicas" and "Dynamo" in p.detail


def test_fp4_on_an_unsupported_architecture_lists_both_reasons():
    p = plan_row(dataclasses.replace(ROW, model_path="openai/gpt-oss-20b", precision="fp4",
                                     gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4"))
    assert p.reason == "architecture" and "fp4_units" in p.also


def test_nvfp4_rows_run_their_nvfp4_checkpoint_on_fp4_units_only():
    """NVFP4 on B200 and GB200 (an FP4 peak in conf/hardware): the model's NVFP4 checkpoint, in nvfp4; on Hopper
    refused with the reason (no NVFP4 kernel), gpt-oss aside (its MXFP4 checkpoint)."""
    nv = dataclasses.replace(ROW, model_path="nvidia/Qwen3-32B-NVFP4", precision="fp4", gemm_quant_mode="nvfp4",
                             moe_quant_mode="nvfp4", engine="trtllm", engine_version="1.2.0")
    for system, hardware in (("b200_sxm", "b200"), ("gb200", "gb200")):
        p = plan_row(dataclasses.replace(nv, system=system))
        assert isinstance(p, RowPlan) and (p.hardware, p.model, p.weights_dtype) == (hardware, "qwen3_32b", "nvfp4")
        assert any("nvidia/Qwen3-32B-NVFP4" in a for a in p.assumptions)
    kimi = plan_row(dataclasses.replace(nv, model_path="moonshotai/Kimi-K2.5", system="b200_sxm", engine="vllm",
                                        engine_version="0.17.0", tp=8, moe_tp=1, moe_ep=8))
    assert (kimi.weights_dtype, kimi.deployment) == ("nvfp4", {"ep": 8})  # (no bf16 groups: not the INT4 checkpoint)
    h100 = plan_row(nv)
    assert isinstance(h100, Unsupported) and h100.reason == "fp4_units"
    assert "without FP4 units" in REASONS[h100.reason]


@pytest.mark.parametrize("engine,version,experts", [("trtllm", "1.2.0rc2", "mxfp4_a8"),
                                                    ("vllm", "0.15.1", "mxfp4")])
def test_gpt_oss_on_blackwell_runs_the_engines_default_mxfp4_kernel(engine, version, experts):
    """TensorRT-LLM (and SGLang) run gpt-oss's MXFP4 experts with MXFP8 activations on Blackwell, vLLM with bf16
    ones; on Hopper every engine runs them weight-only (mxfp4)."""
    row = dataclasses.replace(ROW, model_path="openai/gpt-oss-120b", precision="fp4", gemm_quant_mode="nvfp4",
                              moe_quant_mode="nvfp4", engine=engine, engine_version=version, tp=4, moe_tp=4)
    p = plan_row(dataclasses.replace(row, system="b200_sxm"))
    assert (p.weights_dtype, p.deployment) == ("bf16", {"weights": {"experts": experts}})
    name = {"trtllm": "TensorRT-LLM", "vllm": "vLLM"}[engine]
    assert any(a.startswith(f"{name} on Blackwell") for a in p.assumptions)
    assert plan_row(row).deployment == {"weights": {"experts": "mxfp4"}}  # (H100)


def test_qwen3_5_rows_plan_on_its_yaml():
    p = plan_row(dataclasses.replace(ROW, model_path="Qwen/Qwen3.5-397B-A17B", system="h200_sxm", tp=8, moe_tp=1,
                                     moe_ep=8))
    assert isinstance(p, RowPlan) and p.model == "qwen3_5_397b_a17b"


@pytest.mark.parametrize("label", ["nvfp4", "fp8"])
def test_gpt_oss_rows_run_the_mxfp4_checkpoint_whatever_their_label(label):
    p = plan_row(dataclasses.replace(ROW, model_path="openai/gpt-oss-120b", system="h200_sxm", precision="fp4",
                                     gemm_quant_mode=label, moe_quant_mode=label, tp=4, moe_tp=4))
    assert isinstance(p, RowPlan) and p.model == "gpt_oss_120b"
    assert (p.weights_dtype, p.deployment) == ("bf16", {"weights": {"experts": "mxfp4"}})
    assert any("MXFP4" in a for a in p.assumptions)


def test_moe_rows_map_expert_parallelism_and_checkpoint_formats():
    ep = plan_row(dataclasses.replace(ROW, model_path="MiniMaxAI/MiniMax-M2.5", tp=2, attention_dp=4, moe_tp=1,
                                      moe_ep=8))
    assert ep.model == "minimax_m2_5" and (ep.tp, ep.deployment) == (2, {"dp": 4, "ep": 8})
    kimi = plan_row(dataclasses.replace(ROW, model_path="moonshotai/Kimi-K2.5", system="h200_sxm", precision="int4",
                                        gemm_quant_mode="int4_wo", moe_quant_mode="int4_wo", tp=8, moe_tp=8))
    assert kimi.weights_dtype == "int4_wo"
    assert kimi.deployment["weights"] == {"attention": "bf16", "ffn": "bf16", "shared_experts": "bf16",
                                          "experts": "int4_wo"}
    glm = plan_row(dataclasses.replace(ROW, model_path="zhipuai/GLM-5", engine="sglang", engine_version="glm5-hopper",
                                       system="h200_sxm", moe_quant_mode="fp8_block", tp=8, moe_tp=8))
    assert glm.engine == "sglang_v059_serve" and glm.deployment["sparse_attention"]["indexer_heads"] == 32
    assert glm.weights_dtype == "fp8_block" and "weights" not in glm.deployment  # (block-scaled FP8 checkpoint)


@pytest.mark.parametrize("name, billions, rel", [
    ("qwen3_32b", 32.8, 0.01), ("minimax_m2_5", 230.0, 0.01), ("glm_5", 744.0, 0.01),
    ("kimi_k2_5", 1040.0, 0.02)])  # Kimi: the model card's "1T" / K2's 1.04 T includes the vision tower
def test_the_matrix_model_yamls_have_their_published_sizes(name, billions, rel):
    from inferplan.specs import load_model
    from sim.core.cost.weights import attention_params, ffn_params

    m = load_model(name)
    total = m.num_layers * attention_params(m) + (m.num_layers - m.num_moe_layers) * ffn_params(m, m.intermediate_size)
    if m.moe is not None:
        e = m.moe
        total += m.num_moe_layers * (ffn_params(m, e.expert_intermediate_size) * (e.num_experts + e.shared_experts)
                                     + m.hidden_size * e.num_experts)
    total += 2 * m.vocab_size * m.hidden_size  # embedding and LM head (untied in all four)
    assert total / 1e9 == pytest.approx(billions, rel=rel)


def test_rows_frame_keeps_numbers_numeric_beside_empty_and_nan_cells(tmp_path):
    """A simulated row none of whose requests completed leaves NaN statistics beside other rows' numbers and the
    unsupported rows' empty cells: the column is numeric, the parquet file writes."""
    import pandas as pd

    from sim.validate.silicon.report import typed_frame
    frame = typed_frame(pd.DataFrame({"sim_ttft_p50_s": [0.5, float("nan"), ""], "reason": ["", "", "fp4_units"],
                                      "detail": ["", "13 of 13 requests not completed", "'nvfp4'"]}))
    assert frame["sim_ttft_p50_s"].dtype == float and frame["sim_ttft_p50_s"].isna().tolist() == [False, True, True]
    assert frame["reason"].tolist() == ["", "", "fp4_units"]
    frame.to_parquet(tmp_path / "rows.parquet", index=False)


def test_a_summary_is_the_same_bit_for_bit_whatever_the_order_of_its_rows():
    import random

    rng = random.Random(5)
    errors = [rng.uniform(-1.0, 1.0) * 10.0 ** rng.randint(-3, 3) for _ in range(400)]
    shuffled = errors[:]
    rng.shuffle(shuffled)
    assert sum(shuffled) != sum(errors)  # (summed in another order: other last bits)
    assert summary(shuffled) == summary(errors)
