"""Hopper shape forms: fitted on part of each shipped kernel table, judged on the rest (runs without ../shared)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from calibrate import ops
from calibrate.hopper_report import FIXED_SPLITS, OUT_YAML, evaluate, evaluate_kfold, report_md
from inferplan.specs import load_hardware
from sim.core.cost.comm import Links
from calibrate.efficiency import GemmForm, hardware_generation, load_generation
from sim.core.cost.pricer import OpPricer

TARGETS = {"gemm": 8.0, "moe_gemm": 12.0, "attn": 12.0, "all-reduce": 15.0, "EP": 15.0}


@pytest.fixture(scope="module")
def fitted():
    return evaluate()


def test_held_out_errors_meet_the_targets_and_beat_the_scalar_defaults():
    _, lines = evaluate_kfold()
    assert len(lines) >= 10
    for r in lines:
        target = next(v for k, v in TARGETS.items() if r["op"].startswith(k))
        assert r["n"] >= 1
        assert r["after"] <= target, r
        assert r["after"] < r["before"], r


def test_shipped_generation_file_is_what_the_fit_writes(fitted):
    params, _ = fitted
    shipped = yaml.safe_load(OUT_YAML.read_text())
    assert shipped == yaml.safe_load(yaml.safe_dump(params, sort_keys=False, width=200))
    # every fitted number cites its table
    for group in ("attn_prefill", "attn_decode", "attn_mla_decode", "allreduce", "all_to_all"):
        for v in shipped[group].values():
            assert ".csv" in v["basis"] or "default" in v["basis"] or "as " in v["basis"]


def test_report_markdown_lists_before_and_after(fitted):
    md = report_md(fitted[1])
    assert "| before | after |" in md and md.count("\n| ") >= 11


def test_generation_tags_select_the_forms():
    assert hardware_generation(load_hardware("h100_sxm").source) == "hopper"
    assert hardware_generation(load_hardware("a100_80gb").source) == "ampere"
    assert load_generation("hopper") is not None
    ampere = load_generation("ampere")  # GEMMs, elementwise kernels, attention, NCCL (fitted on Vidur's A100 tables)
    assert ampere is not None and ampere.elementwise is not None and set(ampere.gemm) == {"bf16"}
    assert ampere.gemm["bf16"].sms == 108 and ampere.nccl is not None
    assert ampere.attn_prefill is not None and ampere.attn_decode is not None and ampere.allreduce is None
    assert load_generation("none") is None and load_generation(None) is None and load_generation("ada") is None


def test_elementwise_layer_fuses_as_engines_do():
    ew = load_generation("ampere").elementwise
    bw = load_hardware("a100_80gb").mem_bandwidth_bytes_per_s
    one = ew.layer_s(1, 4096, 6144, 1, 14336, bw)
    floors = sum(2 * f if k == "norm" else f for k, _, f in ew.kinds if k != "add")
    assert one == pytest.approx(floors, rel=0.05)  # a 1-token layer costs its 4 kernels' floors, not ~0
    big = ew.layer_s(32768, 4096, 6144, 32768, 14336, bw)
    assert big > 100 * one
    assert ew.layer_s(0, 4096, 6144, 0, 14336, bw) == 0.0


def test_gemm_form_depends_on_shape_not_only_on_roofline():
    g = load_generation("hopper").gemm_form("fp8")
    hw = load_hardware("h800")
    peak, bw = hw.peak_for("fp8"), hw.mem_bandwidth_bytes_per_s
    # same flops, small K pays the per-tile overhead; a partial last wave costs a full wave
    a = g.time_s(4096, 4096, 8192, *ops.gemm_work(4096, 4096, 8192, "fp8_block"), peak, bw)
    b = g.time_s(4096 * 16, 4096, 512, *ops.gemm_work(4096 * 16, 4096, 512, "fp8_block"), peak, bw)
    assert b > 1.2 * a
    # 133 tiles of 128 need 2 waves (133/264); the kernel's best N tile: 16 wide, 1064 tiles in 9 waves
    assert GemmForm(0.8, 0.0, 0.7, 0.0).fill(128, 128 * 133) == pytest.approx(1064 / 1188)
    # grouped masked runs slower than contiguous at the same work
    f, by = ops.moe_gemm_work(8 * 512, 8, 4096, 7168, "fp8_block")
    assert g.time_s(512, 4096, 7168, f, by, peak, bw, 8, "masked") > g.time_s(512, 4096, 7168, f, by, peak, bw, 8,
                                                                              "contiguous")


def test_pricer_uses_forms_floors_at_launch_and_keeps_profiles_first():
    hw = load_hardware("h100_sxm")
    p = OpPricer(hw, {"gemm": 0.7, "attn_decode": 0.7}, 4e-6, generation=load_generation("hopper"))
    tiny = p.gemm_s("gemm", "bf16", 1, 128, 128, *ops.gemm_work(1, 128, 128, "bf16"))
    assert tiny == 4e-6 and ("gemm", "bf16") in p.analytical
    flops, bytes_ = ops.attn_decode_work(16, np.array([16 * 128.0, 16 * 4000.0]), 32, 32, 128, 2.0)
    run = p.time_s_array("attn_decode", "bf16", flops, bytes_)
    one = p.time_s_array("attn_decode", "bf16", float(flops[1]), float(bytes_[1]))
    assert run[1] == one  # the vectorised run and a single step agree exactly
    plain = OpPricer(hw, {"gemm": 0.7}, 4e-6)
    big = ops.gemm_work(8192, 8192, 8192, "bf16")
    assert p.gemm_s("gemm", "bf16", 8192, 8192, 8192, *big) != plain.gemm_s("gemm", "bf16", 8192, 8192, 8192, *big)


def test_weight_only_gemm_is_priced_by_its_own_kernel_not_by_the_fp8_bandwidth():
    """A W4A16 decode GEMM on Hopper: the pricer takes the int4_wo form (Marlin's memory efficiency), which meets
    the held-out m = 2 row of the W4A16 table; the compute-format (bf16) form would price it 40% too fast."""
    from calibrate.hopper_fit import weight_only_rows

    hw = load_hardware("h100_sxm")
    g = load_generation("hopper")
    p = OpPricer(hw, {"gemm": 0.7}, 4e-6, generation=g)
    row = next(r for r in weight_only_rows("int4_wo") if r["m"] == 2)  # held out by the fit
    t = p.gemm_s("gemm", "int4_wo", 2, 8192, 8192, *ops.gemm_work(2, 8192, 8192, "int4_wo"))
    assert t == pytest.approx(row["t"], rel=0.05)
    as_bf16 = g.gemm["bf16"].time_s(2, 8192, 8192, *ops.gemm_work(2, 8192, 8192, "int4_wo"), hw.peak_for("bf16"),
                                    hw.mem_bandwidth_bytes_per_s)
    assert as_bf16 < 0.75 * row["t"]
    assert g.gemm_form("bf16", "int4_wo") is g.gemm["int4_wo"] and g.gemm_form("fp8", "fp8_block") is g.gemm["fp8"]


def _links(tp: int, ep: int = 1, hw: str = "h100_sxm"):
    return Links(load_hardware(hw), tp=tp, ep=ep, stage_devices=max(tp, ep), pp=1, link_efficiency=0.75, scale={},
                 generation=load_generation("hopper"))


def test_small_all_reduce_takes_the_custom_path_large_the_ring():
    links = _links(8)
    ring = Links(load_hardware("h100_sxm"), tp=8, ep=1, stage_devices=8, pp=1, link_efficiency=0.75, scale={})
    small = 2 * 7168 * 8  # 8 decode tokens of hidden 7168, bf16
    assert links.allreduce_s(small) < ring.allreduce_s(small) / 2  # not 14 latency hops
    ar = links.custom_ar
    big = ar.max_bytes * 4
    assert links.allreduce_s(big) == ring.allreduce_s(big)
    # one-shot wins small, two-shot large (at 8 ranks)
    lat = ar.lat_base_s + ar.lat_per_rank_s * 8
    assert ar.time_s(1024, 8) == pytest.approx(lat + 7 * 1024 / ar.bytes_per_s)
    assert ar.time_s(4 << 20, 8) == pytest.approx(2 * lat + 1.75 * (4 << 20) / ar.bytes_per_s)


def test_deepep_kernels_price_dispatch_by_their_own_figures():
    links = _links(1, ep=32, hw="h800")
    rows, b = 128 * 8, 7168 * (1 + 4 / 128)
    ll = links.all_to_all_s(rows, b, 8, False, "deepep_low_latency")
    d = links.deepep
    assert ll == pytest.approx(d.ll_latency_s + rows * b / d.ll_bytes_per_s)
    measured_ep32_dispatch_s = 182e-6  # low_latency_dispatch_combine_h800.csv v1 EP32 (a training row)
    assert ll == pytest.approx(measured_ep32_dispatch_s, rel=0.1)
    normal = links.all_to_all_s(4096 * 8 / 4, b, 8, True, "deepep_normal")
    generic = links.all_to_all_s(4096 * 8 / 4, b, 8, True, "generic")
    assert normal != generic and math.isfinite(normal)


def _deepseek_prefill(comm_sms: int):
    from sim.config import CostConfig, PoolConfig
    from sim.core.cost.base import BatchShape
    from sim.resolve import pool_pricing
    from inferplan.specs import load_model

    dep = {"preset": "deepseek_v3_prefill", "communication": {"comm_sms": comm_sms}}
    pool = PoolConfig(hardware="h800", model="deepseek_v3")
    pricing = pool_pricing(load_model("deepseek_v3"), load_hardware("h800"), pool, CostConfig(profile="analytical",
                                 efficiency={"gemm": 0.7, "moe_gemm": 0.55, "attn_prefill": 0.5, "attn_decode": 0.7,
                                             "attn_mla_decode": 0.6, "elementwise": 0.6}),
                                 token_budget=32 * 4096, where="test", deployment=dep)
    b = BatchShape(prefill_seqs=32 * 4, prefill_tokens=32 * 4 * 4096, prefill_q_sq_sum=32 * 4 * 4096 * 4097 // 2,
                   prefill_q_ctx_sum=0, prefill_kv_tokens=32 * 4 * 4096, sampled_seqs=32 * 4)
    return pricing.cost, pricing.cost.step_cost(b)


def test_overlap_is_limited_by_the_sms_communication_kernels_hold():
    free_model, free = _deepseek_prefill(0)
    shared_model, shared = _deepseek_prefill(24)
    assert free_model.sm_frac == 0.0 and shared_model.sm_frac == pytest.approx(24 / 132)
    assert shared.total_s > free.total_s
    assert shared.parts["moe_gemm"] == free.parts["moe_gemm"]  # compute reported in full either way
    assert shared.parts["communication"] > free.parts["communication"]


def test_kfold_holds_every_interior_row_out_once_and_ships_fold_one(fitted):
    from calibrate.hopper_fit import split

    rows = list(range(11))  # 9 interior rows: thirds of 3, the two ends always fitted
    held = [split(rows, lambda r: r, fold=f)[1] for f in (1, 2, 0)]
    assert sorted(i for h in held for i in h) == list(range(1, 10))
    assert held[0] == [1, 4, 7] and split(rows, lambda r: r)[1] == held[0]
    params, lines = evaluate_kfold()
    assert params == fitted[0]
    one = {(r["op"], r["table"]): r["n"] for r in fitted[1]}
    for r in lines:  # more rows than one fold's; the fixed-split tables once
        fixed = r["op"].startswith(FIXED_SPLITS)
        assert r["n"] == one[(r["op"], r["table"])] if fixed else r["n"] > one[(r["op"], r["table"])]


def test_gemm_fill_picks_the_narrower_n_tile_that_fills_the_sms():
    f = GemmForm(0.9, 0.0, 0.7, 0.0, tile_m=128, tile_n=128, sms=132)
    # M=128, N=2112: 17 tiles of 128 fill 17/132 SMs; 33 of 64 -> 33/132; 66 of 32 -> 66/132; 132 of 16 -> all
    assert f.fill(128, 2112) == pytest.approx(1.0)
    # N=16384: 128 tiles of 128 (one wave, 128/132) beat 256 of 64 (two waves, 256/264)
    assert f.fill(128, 16384) == pytest.approx(max(128 / 132, 256 / 264, 512 / 528, 1024 / 1056))
    # M padding stays: 100 rows in a 128-row tile
    assert f.fill(100, 16896) == pytest.approx(100 / 128 * 1.0)
