"""Cross-check against Vidur-format tables: small synthetic ones for any device (always run), and Vidur's A100
tables read from ../shared (skipped where it is absent)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from calibrate import ops
from calibrate.crosscheck import AnalyticalModel, crosscheck, main
from calibrate.profile import load_profile
from calibrate.vidur import GPU_HARDWARE, NODE_HARDWARE, hardware_name, load_reference
from calibrate.vidur_profile import main as convert_main
from inferplan.errors import InputError
from inferplan.paths import shared_root
from inferplan.specs import load_hardware

VIDUR = shared_root() / "reference-profiles" / "vidur"
_absent = pytest.mark.skipif(not VIDUR.is_dir(), reason=f"{VIDUR} is absent (set INFERPLAN_SHARED_ROOT or add ../shared)")


def shared(test):
    """Reads Vidur's full A100 tables from the shared root; skipped where they are absent."""
    return pytest.mark.shared_trace(_absent(test))
OPS = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
       "mlp_up_proj", "mlp_act", "mlp_down_proj", "add", "emb")


def _synthetic(root: Path, gpu: str = "h100", node: str = "h100_dgx") -> Path:
    """A tiny Vidur-format folder: one model's mlp.csv at TP 1/2 and an all_reduce.csv, times from a made-up law
    (t = 5 us + work / rate) so that fits have something to find."""
    rows = []
    for tp in (1, 2):
        for t in (1, 8, 64, 256, 512, 1024, 2048, 4096):
            r = {"n_head": 32, "n_kv_head": 8, "n_embd": 4096, "n_expanded_embd": 14336, "vocab_size": 128256,
                 "use_gated_mlp": True, "num_tokens": t, "num_tensor_parallel_workers": tp}
            for i, op in enumerate(OPS):
                r[f"time_stats.{op}.median"] = 0.005 + t * (i + 1) * 1e-5 / tp
            rows.append(r)
    mlp = root / "compute" / gpu / "meta-llama" / "Llama-3-8B" / "mlp.csv"
    mlp.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(mlp, index=False)
    ar = [{"rank": 0, "num_workers": p, "size": s, "collective": "all_reduce", "devices_per_node": 8,
           "max_devices_per_node": 8, "time_stats.all_reduce.median": 0.01 + s / 2e8}
          for p in (2, 8) for s in (2048, 65536, 1 << 20, 1 << 24)]
    net = root / "network" / node / "all_reduce.csv"
    net.parent.mkdir(parents=True)
    pd.DataFrame(ar).to_csv(net, index=False)
    return root


def test_every_vidur_device_and_node_name_maps_to_a_hardware_entry():
    for name in (*GPU_HARDWARE, *NODE_HARDWARE):
        assert load_hardware(hardware_name(name)).name == hardware_name(name)
    assert {"a100", "h100", "a40"} <= set(GPU_HARDWARE)
    assert {"a100_dgx", "h100_dgx", "a100_pairwise_nvlink", "h100_pairwise_nvlink"} <= set(NODE_HARDWARE)
    assert hardware_name("h100") == "h100_sxm" and hardware_name("h800") == "h800"


@pytest.mark.parametrize("gpu,node,hw", [("h100", "h100_dgx", "h100_sxm"), ("a40", "a40_pairwise_nvlink", "a40")])
def test_crosscheck_any_gpu_writes_to_the_run_folder(tmp_path, monkeypatch, capsys, gpu, node, hw):
    folder = _synthetic(tmp_path / "vidur", gpu, node)
    monkeypatch.chdir(tmp_path)
    assert main([str(folder), "--hardware", gpu, "--profile", "none"]) == 0
    (out,) = (tmp_path / "runs" / "crosscheck").glob("*/crosscheck.json")
    doc = json.loads(out.read_text())
    assert doc["hardware"] == hw
    assert (AnalyticalModel(load_hardware(hw), COST).gen is not None)
    ops_seen = {r["op"] for r in doc["by_op"]}
    assert {"attn_pre_proj", "mlp_up_proj", "layer_elementwise"} <= ops_seen
    assert any(o.startswith("all_reduce") for o in ops_seen) == (NODE_HARDWARE[node] == hw)
    assert "cost model vs Vidur" in capsys.readouterr().out


def test_crosscheck_names_the_hardware_the_tables_map_to(tmp_path, capsys):
    folder = _synthetic(tmp_path / "vidur")
    with pytest.raises(SystemExit) as exit_:
        main([str(folder), "--hardware", "a100_80gb", "--profile", "none", "--out", str(tmp_path / "x.json")])
    assert exit_.value.code == 2 and "map to h100_sxm" in capsys.readouterr().err


def test_unknown_device_names_are_reported(tmp_path):
    folder = _synthetic(tmp_path / "vidur", "b200", "b200_dgx")
    with pytest.raises(InputError, match="known device or node name"):
        load_reference(folder)


def test_converter_writes_a_profile_the_simulator_loads(tmp_path, capsys):
    folder = _synthetic(tmp_path / "vidur")
    out = tmp_path / "h100_vidur.parquet"
    assert convert_main([str(folder), "--hardware", "h100", "--out", str(out)]) == 0
    prof = load_profile(out, expected_hardware="h100_sxm")
    assert {("gemm", "bf16"), ("elementwise", "bf16")} <= set(prof.curves)
    pricer = pytest.importorskip("sim.core.cost.pricer")
    p = pricer.OpPricer(load_hardware("h100_sxm"), {}, 4e-6, prof)
    flops, bytes_ = ops.gemm_work(4096, 6144, 4096, "bf16")
    assert p.time_s("gemm", "bf16", flops, bytes_) > 0 and ("gemm", "bf16") in p.measured
    assert "cost.profile=" in capsys.readouterr().out
COST = {"efficiency": {"gemm": 0.7, "elementwise": 0.6, "attn_prefill": 0.5, "attn_decode": 0.7},
        "launch_s": 4e-6, "link_efficiency": 0.75}


@pytest.fixture(scope="module")
def slice_points():
    if not VIDUR.is_dir():
        pytest.skip("../shared/reference-profiles/vidur is absent")
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
    assert all(p.hardware == "a100_80gb" for p in points if p.op != "allreduce")
    assert {p.hardware for p in points if p.op == "allreduce"} == {"a100_80gb", "a100_pcie"}


def test_analytical_model_is_the_simulators(slice_points):
    pricer = pytest.importorskip("sim.core.cost.pricer")
    hw = load_hardware("a100_80gb")
    mine = AnalyticalModel(hw, COST, generation=False)
    theirs = pricer.OpPricer(hw, COST["efficiency"], COST["launch_s"])
    for p in slice_points[0]:
        if p.op != "allreduce":
            assert mine.time_s(p) == pytest.approx(theirs.time_s(p.op, p.dtype, p.flops, p.bytes), rel=1e-12)
    # with the Ampere generation file: elementwise kernels by kind, as calibrate.efficiency prices them
    gen = AnalyticalModel(hw, COST)
    assert gen.gen is not None and gen.gen.elementwise is not None
    norm = next(p for p in slice_points[0] if p.vidur_op == "input_layernorm")
    assert gen.time_s(norm) == gen.gen.elementwise.kernel_s("norm", norm.bytes, hw.mem_bandwidth_bytes_per_s)


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


@shared
def test_command_writes_json(tmp_path, capsys):
    out = tmp_path / "x.json"
    assert main([str(VIDUR.parent), "--sample-rows", "20", "--out", str(out), "--profile", "none"]) == 0
    doc = json.loads(out.read_text())
    assert doc["hardware"] == "a100_80gb" and doc["by_op_tp"]
    assert "cost model vs Vidur" in capsys.readouterr().out
