"""Cross-check against Vidur's A100 tables (read from ../shared; skipped where it is absent)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibrate import ops
from calibrate.crosscheck import AnalyticalModel, crosscheck, main
from calibrate.vidur import load_reference
from inferplan.specs import load_hardware

VIDUR = Path(__file__).resolve().parents[3] / "shared" / "reference-profiles" / "vidur"
pytestmark = pytest.mark.skipif(not VIDUR.is_dir(), reason="../shared/reference-profiles/vidur is absent")
COST = {"efficiency": {"gemm": 0.7, "elementwise": 0.6, "attn_prefill": 0.5, "attn_decode": 0.7},
        "launch_s": 4e-6, "link_efficiency": 0.75}


@pytest.fixture(scope="module")
def slice_points():
    points, notes = load_reference(VIDUR, sample_rows=40)  # a tiny slice of every file
    return points, notes


def test_maps_vidur_ops_onto_our_vocabulary(slice_points):
    points, notes = slice_points
    assert {p.op for p in points} == {"gemm", "elementwise", "attn_prefill", "attn_decode", "allreduce"}
    llama = [p for p in points if p.model == "meta-llama/Meta-Llama-3-8B" and p.tp == 1]
    qkv = next(p for p in llama if p.vidur_op == "attn_pre_proj")
    m = qkv.tokens
    assert qkv.shape == f"m={m},n=6144,k=4096"            # (32 + 2 x 8) heads x 128
    assert (qkv.flops, qkv.bytes) == ops.gemm_work(m, 6144, 4096, "bf16")
    up = next(p for p in llama if p.vidur_op == "mlp_up_proj" and p.tokens == m)
    assert up.shape == f"m={m},n=28672,k=4096"              # gated: gate + up fused
    assert all(p.hardware == "a100_80gb" for p in points)
    assert any("a100_pairwise_nvlink" in n for n in notes)


def test_analytical_model_is_the_simulators(slice_points):
    pricer = pytest.importorskip("sim.cost.pricer")
    hw = load_hardware("a100_80gb")
    mine = AnalyticalModel(hw, COST)
    theirs = pricer.OpPricer(hw, COST["efficiency"], COST["launch_s"])
    for p in slice_points[0]:
        if p.op != "allreduce":
            assert mine.time_s(p) == pytest.approx(theirs.time_s(p.op, p.dtype, p.flops, p.bytes), rel=1e-12)


def test_report_has_errors_per_op_and_tp(slice_points):
    result = crosscheck(slice_points[0], load_hardware("a100_80gb"), COST, profile=None)
    rows = {(r["op"], r["tp"]): r for r in result["by_op_tp"]}
    assert rows[("mlp_up_proj", 1)]["analytical"]["n"] > 0
    assert rows[("mlp_up_proj", 1)]["profile"]["n"] == 0
    assert all(r["analytical"]["mape_pct"] >= 0 for r in result["by_op_tp"])
    assert result["layer_sum"] and result["refit_curves"]


def test_refit_errors_only_on_held_out_shapes(slice_points):
    points = slice_points[0]
    result = crosscheck(points, load_hardware("a100_80gb"), COST, profile=None)
    analysed = sum(r["analytical"]["n"] for r in result["by_op_tp"])
    refit = sum(r["refit"]["n"] for r in result["by_op_tp"])
    assert analysed == len(points) and 0 < refit < len(points) / 3


def test_command_writes_json(tmp_path, capsys):
    out = tmp_path / "x.json"
    assert main([str(VIDUR.parent), "--sample-rows", "20", "--out", str(out), "--profile", "none"]) == 0
    doc = json.loads(out.read_text())
    assert doc["hardware"] == "a100_80gb" and doc["by_op_tp"]
    assert "cost model vs Vidur" in capsys.readouterr().out
