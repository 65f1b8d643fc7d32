"""Pricing from measurements (`cost.profile=measured`): each pool priced from the AIConfigurator grid of its GPU
where the grid covers an op, analytically (and listed, with the reason) where it does not; the run says which
database, engine and version measured it. docs/cost-model.md, "Measured grids from AIConfigurator"."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from calibrate.aic.grid_model import decode_shape
from calibrate.profile import load_profile, write_grid_profile
from inferplan.specs import CONF_DIR, load_hardware, load_model
from sim.api import run_composed
from sim.compose import compose_config
from sim.config import CostConfig, PoolConfig
from sim.core.cost import experts as ex
from sim.core.cost.base import PARTS, BatchShape
from sim.core.cost.comm import CUSTOM_ALLREDUCE_MAX_BYTES, Links
from sim.core.cost.deployment import ExpertOptions
from calibrate.aic.catalogue import Grid, catalogue, choose
from sim.core.cost.factory import choose_profile, default_grid, resolve_profile
from sim.resolve import pool_pricing

ROOFLINE = yaml.safe_load((CONF_DIR / "cost" / "roofline.yaml").read_text())
MEASURED = CostConfig(profile="measured", efficiency=ROOFLINE["efficiency"], launch_s=ROOFLINE["launch_s"])
SHORT = ["scenario=smoke", "metrics.progress=false", "++scenario.traffic.num_requests=200", "cost.profile=measured"]


def _run(tmp_path, name: str, *overrides: str) -> dict:
    summary, _ = run_composed(compose_config([*SHORT, *overrides]), tmp_path / name)
    return summary


def _pricing(model: str, hardware: str, tp: int, **pool):
    dep = pool.pop("deployment", None)
    p = PoolConfig(hardware=hardware, model=model, tp=tp, **pool)
    return pool_pricing(load_model(model), load_hardware(hardware), p, MEASURED, token_budget=8192, where="t",
                        deployment=dep)


def test_llama_70b_on_h100_is_priced_from_the_h100_grid(tmp_path):
    s = _run(tmp_path, "llama", "scenario.pools.main.model=llama3_70b", "scenario.pools.main.hardware=h100_sxm",
             "+scenario.pools.main.tp=8")
    cm = s["pools"]["main"]["cost_model"]
    # every op the database measures is priced from it; only the elementwise kernels (no table) fall back
    assert s["cost_model"]["kind"] == cm["kind"] == "measured"
    assert cm["not_in_database"] == ["elementwise/bf16"]
    assert cm["profile"].endswith("aic/h100_sxm/trtllm.parquet")
    assert set(cm["measured_ops"]) == {"gemm/bf16", "attn_prefill/bf16", "attn_decode/bf16", "allreduce/custom",
                                       "allreduce/nccl"}
    assert cm["analytical_ops"] == ["elementwise/bf16"]  # (the tables hold no norm, rotary or activation kernel)
    assert "no elementwise kernels" in cm["fallback"]["elementwise/bf16"]
    src = cm["source"]
    assert (src["commit"], src["engine"], src["engine_versions"], src["nccl"]) == \
        ("095f58a5", "trtllm", ["1.3.0rc20"], "2.29.2")
    text = s["cost_model"]["sources"]["main"]
    assert "TensorRT-LLM 1.3.0rc20" in text and "095f58a5" in text and "names no engine preset" in text
    assert s["requests"]["completed"] == 200


def test_the_default_prices_a_vllm_pool_from_the_vllm_grid(tmp_path):
    """A fresh clone's default (`cost.profile=auto`): the pool's engine preset picks the grid."""
    s, _ = run_composed(compose_config(["scenario=smoke", "metrics.progress=false", "++scenario.traffic.num_requests=50",
                                        "scenario.pools.main.model=llama3_70b", "scenario.pools.main.hardware=h100_sxm",
                                        "+scenario.pools.main.tp=8", "engine=vllm_v1_serve"]), tmp_path / "v")
    cm = s["pools"]["main"]["cost_model"]
    assert s["cost_model"]["kind"] == "measured" and cm["profile"].endswith("aic/h100_sxm/vllm.parquet")
    assert cm["source"]["engine"] == "vllm" and "vllm_v1_serve" in cm["source"]["choice"]
    assert "vLLM 0.24.0, the nearest measured version" in s["cost_model"]["sources"]["main"]


def test_deepseek_v3_on_h200_prices_mla_attention_from_the_grid(tmp_path):
    s = _run(tmp_path, "dsv3", "scenario.pools.main.model=deepseek_v3", "scenario.pools.main.hardware=h200",
             "+scenario.pools.main.tp=8", "+scenario.pools.main.weights_dtype=fp8_block", "batching=chunked_prefill",
             "scenario.pools.main.instances=1")
    cm = s["pools"]["main"]["cost_model"]
    assert cm["kind"] == s["cost_model"]["kind"] == "measured"
    assert {"gemm/fp8_block", "moe_gemm/fp8_block", "allreduce/custom", "attn_mla_prefill/bf16",
            "attn_mla_decode/bf16", "mla_bmm/bf16"} <= set(cm["measured_ops"])
    assert set(cm["fallback"]) == set(cm["not_in_database"]) == {"elementwise/bf16"}
    assert cm["experts"]["moe_distribution"] == "balanced"
    assert cm["source"]["system"] == "h200_sxm" and s["requests"]["completed"] == 200


def test_a_b200_pool_runs_on_the_vllm_grid(tmp_path):
    s = _run(tmp_path, "b200", "scenario.pools.main.hardware=b200")
    cm = s["pools"]["main"]["cost_model"]
    assert cm["kind"] == "measured" and "gemm/bf16" in cm["measured_ops"]
    assert cm["source"]["engine"] == "vllm" and s["requests"]["completed"] == 200
    # MLA on B200: vLLM measured only whole MLA modules, other engines the kernel: in the database, not used
    d = _pricing("deepseek_v3", "b200", 8, weights_dtype="fp8_block").cost.describe()
    assert d["kind"] == "mixed" and "attn_mla_decode/bf16" not in d["not_in_database"]
    assert "no mla_prefill or mla_decode measurements" in d["fallback"]["attn_mla_decode/bf16"]


def test_nvfp4_on_blackwell_is_priced_from_its_measured_tables():
    """NVFP4 weights (W4A4) on B200: GEMMs and MoE from the grid's nvfp4 tables, faster than FP8 at the same step;
    the analytical form computes at the FP4 peak with 4.5-bit weights."""
    from sim.core.cost.base import BatchShape
    nv = _pricing("llama3_70b", "b200", 4, weights_dtype="nvfp4")
    fp8 = _pricing("llama3_70b", "b200", 4, weights_dtype="fp8")
    d = nv.cost.describe()
    assert d["kind"] == "measured" and "gemm/nvfp4" in d["measured_ops"]
    assert nv.memory.weight_bytes < 0.6 * fp8.memory.weight_bytes
    shape = BatchShape(prefill_seqs=4, prefill_tokens=8192, prefill_q_ctx_sum=0, prefill_q_sq_sum=4 * 2048 * 2049 // 2,
                       prefill_kv_tokens=8192, sampled_seqs=4)
    t_nv, t_fp8 = (p.cost.step_cost(shape, 0.0, 0.0, 0, False).parts["dense_gemm"] for p in (nv, fp8))
    assert 0 < t_nv < t_fp8
    moe = _pricing("mixtral_8x7b", "b200", 4, weights_dtype="nvfp4").cost.describe()
    assert "moe_gemm/nvfp4" in moe["measured_ops"]
    ana = pool_pricing(load_model("llama3_70b"), load_hardware("b200"),
                       PoolConfig(hardware="b200", model="llama3_70b", tp=4, weights_dtype="nvfp4"),
                       CostConfig(profile="analytical", efficiency=ROOFLINE["efficiency"], launch_s=ROOFLINE["launch_s"]),
                       token_budget=8192, where="t")
    assert ana.cost.describe()["kind"] == "analytical"


def test_hardware_without_a_grid_stays_analytical(tmp_path):
    assert resolve_profile("measured", load_hardware("h800")) is None
    s = _run(tmp_path, "h800", "scenario.pools.main.hardware=h800")
    assert s["cost_model"]["kind"] == "analytical" and s["cost_model"]["profile"] is None
    assert "sources" not in s["cost_model"] and "source" not in s["pools"]["main"]["cost_model"]


def test_auto_picks_the_grid_of_the_pools_hardware_and_engine():
    """`cost.profile=auto` (the default): the grid measured in the pool's engine at the nearest version; a pool
    naming no engine gets the GPU's engine with the most measured rows; the reason names both."""
    h100 = load_hardware("h100_sxm")
    for preset, version, framework in (("vllm_v1_serve", "0.11-0.18", "vllm"), ("sglang_v05_serve", "0.5.x", "sglang"),
                                       ("trtllm_v1_serve", "1.x", "trtllm")):
        profile, why = choose_profile("auto", h100, preset, version)
        assert profile.provenance["engine"]["framework"] == framework
        assert preset in why and "nearest measured version" in why
    profile, why = choose_profile("auto", h100)
    assert profile.provenance["engine"]["framework"] == profile.provenance["engine"]["default"] == "trtllm"
    assert "names no engine preset" in why and "most measured rows" in why
    assert choose_profile("auto", load_hardware("h800")) == (None, "")
    assert choose_profile("analytical", h100) == (None, "")


def test_the_nearest_version_wins_and_a_tie_goes_to_the_newer(tmp_path):
    import shutil
    src = default_grid("a100_80gb").parent
    for name in ("vllm.parquet", "trtllm.parquet"):
        shutil.copyfile(src / name, tmp_path / name)
    grids = catalogue(tmp_path.parent, tmp_path.name)
    assert {g.framework: g.version for g in grids} == {"vllm": "0.14.0", "trtllm": "1.0.0"}
    older = [g for g in grids if g.framework == "vllm"][0]
    newer = Grid(tmp_path / "vllm@0.24.0.parquet", "vllm", "0.24.0", older.default)
    assert choose([older, newer], "vllm_v1", "0.8.5").grid is older
    assert choose([older, newer], "vllm_v1_serve", "0.20").grid is newer
    assert choose([older, newer], "vllm_v1_serve", "0.19").grid is newer  # 5 minor versions either way: the newer
    assert choose([older, newer], "sglang_v05_serve", "0.5.x").reason.startswith("no grid of the pool's engine")


def test_a_gemm_at_a_grid_point_is_the_measured_latency_and_a_step_sums_the_grid():
    pricing = _pricing("llama3_70b", "h100_sxm", 8)
    cost, pricer = pricing.cost, pricing.cost.pricer
    grid = load_profile(default_grid("h100_sxm")).grid
    c, r = grid._columns, grid._rows["gemm"]
    row = r[(c["dtype"][r] == "bf16") & (c["m"][r] == 128) & (c["n"][r] == 8192) & (c["k"][r] == 1024)][0]
    # The O projection of a 128-token prefill on one of 8 GPUs: 8 heads x 128 -> hidden 8192; measured there.
    # (The lookup multiplies back log(latency / reference): a few ulps.)
    assert pricer.gemm_s("gemm", "bf16", 128.0, 8192.0, 1024.0, 0.0, 0.0) == pytest.approx(c["latency_s"][row],
                                                                                            rel=1e-12)
    step = cost.step_cost(BatchShape(prefill_seqs=1, prefill_tokens=128, prefill_q_sq_sum=128 * 129 // 2,
                                     prefill_kv_tokens=128, sampled_seqs=1))
    layer = sum(grid.latency_s("gemm", dtype="bf16", m=128, n=n, k=k)  # QKV, O, gate+up, down per GPU
                for n, k in ((8 * 128 + 2 * 128, 8192), (8192, 8 * 128), (2 * 28672 / 8, 8192), (8192, 28672 / 8)))
    head = grid.latency_s("gemm", dtype="bf16", m=1, n=128256 / 8, k=8192)
    assert step.parts["dense_gemm"] == pytest.approx(80 * layer + head, rel=1e-12)
    ar = grid.latency_s("allreduce", bytes=128 * 8192 * 2.0, gpus=8, impl="custom")  # two per layer
    assert step.parts["communication"] == pytest.approx(80 * 2 * ar, rel=1e-12)


def test_decode_priced_over_an_array_of_contexts_equals_each_step_alone():
    cost = _pricing("llama3_70b", "h100_sxm", 8).cost
    first = BatchShape(decode_seqs=24, decode_ctx_sum=24 * 700, sampled_seqs=24)
    steps = 300
    totals, parts = cost.decode_run(first, steps)
    for j in range(steps):
        b = first._replace(decode_ctx_sum=first.decode_ctx_sum + 24 * j)
        one = cost.step_cost(b)
        total, direct, _ = cost._price(b, float(b.decode_ctx_sum))  # (bypassing the tables)
        assert totals[j] == one.total_s == float(total)
        for k in PARTS:
            assert parts[k][j] == one.parts[k] == float(direct[k])
    grid = load_profile(default_grid("h100_sxm")).grid  # decode attention is the grid's
    batch, ctx = decode_shape(24, float(first.decode_ctx_sum))
    one_layer = grid.latency_s("attn_decode", batch=batch, ctx=ctx, heads=8, kv_heads=1, head_dim=128, dtype="bf16")
    assert cost.step_cost(first).parts["attention"] == pytest.approx(80 * one_layer, rel=1e-12)


def test_collectives_follow_the_engines_custom_allreduce_rule():
    links = _pricing("llama3_70b", "b200", 8).cost.links
    assert links.ar_impls == ("custom", "custom_eager", "nccl")  # (vLLM on B200 measured both custom modes)
    assert links.allreduce_impl(1e6, graphed=True) == "custom"
    assert links.allreduce_impl(1e6, graphed=False) == "custom_eager"
    assert links.allreduce_impl(CUSTOM_ALLREDUCE_MAX_BYTES + 1, graphed=True) == "nccl"
    grid = load_profile(default_grid("b200")).grid
    assert links.allreduce_s(1e6) == pytest.approx(grid.latency_s("allreduce", bytes=1e6, gpus=8, impl="custom"))
    wide = Links(load_hardware("h100_sxm"), tp=16, ep=16, stage_devices=16, pp=1, link_efficiency=0.75, scale={},
                 grid=links.grid)
    assert wide.ar_impls == () and not wide.a2a_grid  # across nodes: the analytical forms


def test_expert_parallel_all_to_all_and_power_law_routing():
    dep = {"dp": 8, "ep": 8, "experts": {"zipf_s": 1.0}}
    pricing = _pricing("deepseek_v3", "h200", 1, weights_dtype="fp8_block", deployment=dep)
    d = pricing.cost.describe()
    assert {"all_to_all/nccl_bf16", "moe_gemm/fp8_block"} <= set(d["measured_ops"])
    assert d["experts"]["moe_distribution"] == "power_law_1.2"  # Zipf s = 1: load density x^-2, nearest 1.2
    dep2 = dep | {"communication": {"ep_kernel_decode": "deepep_low_latency", "dispatch_dtype": "fp8_block"}}
    d2 = _pricing("deepseek_v3", "h200", 1, weights_dtype="fp8_block", deployment=dep2).cost.describe()
    assert {"all_to_all/deepep_low_latency_dispatch", "all_to_all/deepep_low_latency_combine"} <= \
        set(d2["measured_ops"])
    dep3 = dep | {"communication": {"ep_kernel_decode": "deepep_low_latency", "dispatch_dtype": "bf16"}}
    d3 = _pricing("deepseek_v3", "h200", 1, weights_dtype="fp8_block", deployment=dep3).cost.describe()
    assert "measure fp8_block dispatch only" in d3["fallback"]["all_to_all/deepep_low_latency_dispatch"]
    assert "all_to_all/deepep_low_latency_dispatch" in d3["not_in_database"]


@pytest.mark.parametrize("opts, want", [
    (ExpertOptions(), "balanced"),
    (ExpertOptions(zipf_s=1.0), "power_law_1.2"),
    (ExpertOptions(zipf_s=20.0), "power_law_1.01"),
    (ExpertOptions(zipf_s=1.0, load_histogram=(1.0, 2.0)), "balanced"),  # measured loads: applied as rows
    (ExpertOptions(zipf_s=1.0, imbalance=1.3), "balanced"),
])
def test_routing_distribution_of_the_deployment(opts, want):
    assert ex.grid_distribution(opts, ["balanced", "power_law_1.01", "power_law_1.2"]) == want
    assert ex.grid_distribution(opts, ["balanced"]) == "balanced"


def test_step_parts_sum_and_measured_pricing_is_deterministic():
    a = _pricing("llama3_70b", "h100_sxm", 8).cost
    b = BatchShape(prefill_seqs=2, prefill_tokens=900, prefill_q_ctx_sum=300 * 600, prefill_q_sq_sum=2 * 450 * 451 // 2,
                   prefill_kv_tokens=1500, decode_seqs=30, decode_ctx_sum=30 * 2000, sampled_seqs=32)
    one = a.step_cost(b)
    assert sum(one.parts.values()) == pytest.approx(one.total_s, rel=1e-14) and one.total_s > 0
    assert np.isfinite(list(one.parts.values())).all()


def _deepseek_pool(role: str, profile: str = "measured"):
    cost = MEASURED if profile == "measured" else CostConfig(profile=profile, efficiency=ROOFLINE["efficiency"],
                                                             launch_s=ROOFLINE["launch_s"])
    p = PoolConfig(hardware="h200", model="deepseek_v3", tp=1, role=role)
    return pool_pricing(load_model("deepseek_v3"), load_hardware("h200"), p, cost, token_budget=8192, where="t",
                        deployment={"preset": f"deepseek_v3_{role}"}).cost


def test_deepseek_day_pools_on_h200_list_only_what_the_database_lacks():
    """DeepSeek's prefill unit (EP32: 4 nodes) and decode unit (EP144: 18 nodes) on H200: MLA attention and DeepEP
    from the tables where they measured it; what falls back is what the database does not measure at all."""
    prefill, decode = _deepseek_pool("prefill").describe(), _deepseek_pool("decode").describe()
    assert prefill["kind"] == decode["kind"] == "measured"
    assert {"attn_mla_prefill/bf16", "all_to_all/deepep_normal_dispatch", "all_to_all/deepep_normal_combine",
            "moe_gemm/fp8_block"} <= set(prefill["measured_ops"])
    assert prefill["analytical_ops"] == prefill["not_in_database"] == ["elementwise/bf16"]
    assert {"attn_mla_decode/bf16", "mla_bmm/bf16"} <= set(decode["measured_ops"])
    assert decode["not_in_database"] == decode["analytical_ops"] == [
        "all_to_all/deepep_low_latency_combine", "all_to_all/deepep_low_latency_dispatch", "elementwise/bf16"]
    assert "EP 144 (18 nodes)" in decode["fallback"]["all_to_all/deepep_low_latency_dispatch"]


def test_mla_and_deepep_at_grid_points_are_the_table_rows():
    cost = _deepseek_pool("prefill")
    grid = load_profile(default_grid("h200")).grid
    c = grid._columns
    r = grid._rows["mla_decode"]
    row = r[(c["dtype"][r] == "bf16") & (c["heads"][r] == 128) & (c["batch"][r] == 64) & (c["ctx"][r] == 4096)][0]
    got = cost.pricer.mla_decode_s("bf16", 64.0, 64.0 * 4096, 128)
    assert got == pytest.approx(c["latency_s"][row], rel=1e-6)  # (the profile stores float32)
    r = grid._rows["mla_prefill"]
    row = r[(c["dtype"][r] == "bf16") & (c["heads"][r] == 128) & (c["batch"][r] == 4) & (c["seq"][r] == 2048)][0]
    got = cost.pricer.mla_prefill_s("bf16", 4.0 * 2048, 4.0 * 2048 * 2049 / 2, 0.0, 128)
    assert got == pytest.approx(c["latency_s"][row], rel=1e-6)
    r = grid._rows["deepep_normal"]
    for op, dt in (("deepep_dispatch", "fp8_block"), ("deepep_combine", "bf16")):
        sel = ((c["op"][r] == op) & (c["gpus"][r] == 32) & (c["tokens"][r] == 4096) & (c["hidden"][r] == 7168)
               & (c["topk"][r] == 8) & (c["experts"][r] == 256))
        row = r[sel][0]
        phase = op.replace("deepep_", "")
        got = cost.links.all_to_all_s(4096 * 8.0, 7168 * 1.0, 8, True, "deepep_normal", dt, phase)
        assert got == pytest.approx(c["latency_s"][row], rel=1e-6), op


def _profile_without(tmp_path, families: tuple[str, ...], missing: bool):
    """The shipped h200 grid without `families`; `missing`: its provenance says the database has none of them."""
    prof = load_profile(default_grid("h200"))
    cols = prof.grid._columns
    keep = ~np.isin(cols["family"], families)
    meta = {k: v for k, v in prof.provenance.items() if k not in ("schema_version", "kind")}
    fams = dict(meta["provenance"])
    for f in families:
        fams[f] = {"missing": f"no {f} table", "in_database": False} if missing else fams[f]
    meta["provenance"] = fams
    path = tmp_path / ("absent.parquet" if missing else "unused.parquet")
    write_grid_profile(path, {k: v[keep] for k, v in cols.items()}, meta)
    return str(path)


def test_a_profile_without_mla_and_deepep_falls_back_and_reads_by_the_database(tmp_path):
    families = ("mla_prefill", "mla_decode", "deepep_normal", "deepep_ll")
    unused = _deepseek_pool("prefill", _profile_without(tmp_path, families, missing=False)).describe()
    assert unused["kind"] == "mixed"  # the database measures them: priced analytically all the same
    assert "no mla_prefill or mla_decode measurements" in unused["fallback"]["attn_prefill/bf16"]
    assert "no DeepEP normal dispatch" in unused["fallback"]["all_to_all/deepep_normal_dispatch"]
    assert unused["not_in_database"] == ["elementwise/bf16"]
    absent = _deepseek_pool("prefill", _profile_without(tmp_path, families, missing=True)).describe()
    assert absent["kind"] == "measured"  # the database has none of them: listed, still measured
    assert set(absent["not_in_database"]) == set(absent["analytical_ops"]) == {
        "attn_prefill/bf16", "all_to_all/deepep_normal_dispatch", "all_to_all/deepep_normal_combine",
        "elementwise/bf16"}
    # the same steps priced: the fallback forms are the analytical model's
    b = BatchShape(prefill_seqs=4, prefill_tokens=4096, prefill_q_sq_sum=4 * 1024 * 1025 // 2, prefill_kv_tokens=4096,
                   sampled_seqs=4)
    with_grid = _deepseek_pool("prefill").step_cost(b)
    without = _deepseek_pool("prefill", _profile_without(tmp_path, families, missing=False)).step_cost(b)
    assert with_grid.parts["attention"] != without.parts["attention"]
    assert with_grid.parts["dense_gemm"] == without.parts["dense_gemm"]


def test_the_provenance_rule(tmp_path):
    """measured: every fallback absent from the database; mixed: one present but unused; analytical: none measured."""
    from sim.core.cost.pricer import OpPricer
    prof = load_profile(default_grid("h200"))
    hw = load_hardware("h200")
    p = OpPricer(hw, ROOFLINE["efficiency"], ROOFLINE["launch_s"], prof)
    assert p.kind == "analytical"
    p.measured.add(("gemm", "bf16"))
    assert p.kind == "measured"
    p.fall_back("elementwise", "bf16", "no table", absent=True)
    assert p.kind == "measured"
    p.fall_back("attn_prefill", "fp8", "not imported")
    assert p.kind == "mixed"
    plain = OpPricer(hw, ROOFLINE["efficiency"], ROOFLINE["launch_s"])  # no grid profile: the old rule
    plain.fall_back("elementwise", "bf16", "ignored without a grid", absent=True)
    assert plain.kind == "analytical" and plain.fallback == {}
