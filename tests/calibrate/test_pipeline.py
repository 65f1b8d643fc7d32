"""The whole calibration on the CPU at toy scale: shapes -> timing -> fit -> profile -> simulator load."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from calibrate import shapes
from calibrate.fit import relative_errors_pct
from calibrate.measurements import COLUMNS, read_measurements
from calibrate.profile import load_profile
from calibrate.run import run_calibration
from calibrate.tiny_models import TINY_MODELS
from inferplan.errors import InputError


@pytest.fixture
def calibrated(make_settings):
    settings = make_settings()
    return settings, run_calibration(settings)


def test_writes_measurements_with_provenance(calibrated):
    settings, result = calibrated
    rows, meta = read_measurements(result.measurements_path)
    assert set(COLUMNS) <= set(pq.read_schema(result.measurements_path).names)
    assert result.sweep.measured == len(rows) > 10
    assert {r["op"] for r in rows} == {"gemm", "attn_decode", "elementwise"}
    assert all(r["measured_s"] > 0 and r["p20_s"] <= r["measured_s"] <= r["p80_s"] for r in rows)
    assert all(r["roofline_s"] > 0 and np.isfinite(r["predicted_s"]) for r in rows)
    prov = meta["provenance"]
    for key in ("device", "driver", "torch", "triton", "cpu_model", "threads", "clocks", "date", "git_commit"):
        assert key in prov
    assert prov["threads"] == 1 and meta["hardware"] == "cpu_local"


def test_profile_loads_and_prices_ops_in_the_simulator(calibrated):
    _, result = calibrated
    profile = load_profile(result.profile_path, expected_hardware="cpu_local")
    assert set(profile.curves) == {("gemm", "bf16"), ("attn_decode", "bf16"), ("elementwise", "bf16")}
    assert profile.provenance["models"] == ["tiny_gqa"]
    assert profile.mem_bytes_per_s == pytest.approx(32e9)  # peaks=datasheet: cpu_local.yaml's figure
    pricer_mod = pytest.importorskip("sim.core.cost.pricer")
    from inferplan.specs import load_hardware
    pricer = pricer_mod.OpPricer(load_hardware("cpu_local"), {"gemm": 0.5}, 1e-6, profile)
    t = pricer.time_s("gemm", "bf16", 2 * 16 * 256 * 256, 2 * (16 * 256 + 256 * 256 + 16 * 256))
    assert t > 0 and pricer.kind == "measured"


def test_reported_error_is_the_held_out_rows_error(calibrated):
    """fit.json's held-out MAPE is recomputed from the held-out profile rows alone, with the shipped curve."""
    _, result = calibrated
    rows, _ = read_measurements(result.measurements_path)
    fit = json.loads(result.fit_path.read_text())
    profile = load_profile(result.profile_path)
    for key, entry in fit["profile"].items():
        op, dtype = key.split("/")
        mine = [r for r in rows if r["op"] == op and r["dtype"] == dtype and r["in_profile"]]
        held = [r for r in mine if r["held_out"]]
        assert entry["n_train"] == len(mine) - len(held) and entry["n_held_out"] == len(held)
        if held:
            err = relative_errors_pct(profile.curve(op, dtype), [r["roofline_s"] for r in held],
                                      [r["measured_s"] for r in held])
            assert entry["held_out_mape_pct"] == pytest.approx(np.mean(np.abs(err)), rel=1e-9)
            assert entry["held_out_max_abs_pct"] == pytest.approx(np.max(np.abs(err)), rel=1e-9)


def test_second_run_measures_nothing_new(make_settings):
    first = run_calibration(make_settings())
    second = run_calibration(make_settings())
    assert first.sweep.measured > 0
    assert second.sweep.measured == 0 and second.sweep.reused == first.sweep.measured
    assert len(read_measurements(second.measurements_path)[0]) == first.sweep.measured


@pytest.fixture
def one_read_timer(monkeypatch):
    """A timer that reads the budget's clock once per point. The real one reads it before every launch, and how
    many launches it makes depends on how busy the machine is: with a fake clock that would decide how far the
    budget reaches. The timings are not what these tests are about."""
    import calibrate.run as run_module
    from calibrate.timing import Timing

    def one_read(bench, control=None):
        if control is not None:
            control.check()
        return Timing(1e-5, 1e-5, 1e-5, 3)
    monkeypatch.setattr(run_module, "_timer", lambda device, grid: one_read)


def test_budget_stops_cleanly_keeps_points_and_resume_finishes(make_settings, step_clock, one_read_timer):
    stopped = run_calibration(make_settings(budget_s=6.0), clock=step_clock(0.1))
    assert stopped.sweep.stopped_by_budget and stopped.sweep.remaining > 0
    kept = read_measurements(stopped.measurements_path)[0]
    assert 0 < len(kept) == stopped.sweep.measured
    assert json.loads(stopped.fit_path.read_text())["sweep"]["stopped_by_budget"] is True
    resumed = run_calibration(make_settings())
    assert not resumed.sweep.stopped_by_budget
    assert resumed.sweep.reused == len(kept) and resumed.sweep.measured == stopped.sweep.remaining


def test_points_are_spread_over_every_op_when_the_budget_is_short(make_settings, step_clock, one_read_timer):
    result = run_calibration(make_settings(budget_s=8.0), clock=step_clock(0.1))
    assert result.sweep.stopped_by_budget and result.sweep.remaining > 0  # the budget did cut the sweep short
    ops = {r["op"] for r in read_measurements(result.measurements_path)[0]}
    assert ops == {"gemm", "attn_decode", "elementwise"}  # round robin, not gemm first


def test_resume_refuses_measurements_from_another_setup(make_settings):
    run_calibration(make_settings(ops=("elementwise",)))
    with pytest.raises(InputError, match=r"another device or setup.*threads"):
        run_calibration(make_settings(ops=("elementwise",), threads=2))
    with pytest.raises(InputError, match="measured as 'cpu_local', this run is 'cpu_server'"):
        run_calibration(make_settings(ops=("elementwise",), hardware="cpu_server"))


def test_measured_peaks_are_recorded_beside_the_datasheet(make_settings):
    result = run_calibration(make_settings(peaks="measured", ops=("elementwise",)))
    meta = read_measurements(result.measurements_path)[1]
    peaks = meta["peaks"]
    assert set(peaks["measured"]["flops_per_s"]) == {"bf16", "int8", "fp32"}
    assert peaks["used"]["source"]["fp8"] == "datasheet" and peaks["used"]["source"]["mem"] == "measured"
    profile = load_profile(result.profile_path)
    assert profile.mem_bytes_per_s == pytest.approx(peaks["measured"]["mem_bytes_per_s"])
    assert profile.provenance["peaks_datasheet"]["mem_bytes_per_s"] == pytest.approx(32e9)


def test_mla_moe_model_calibrates(make_settings, tiny_models):
    result = run_calibration(make_settings(model=str(tiny_models["tiny_mla"]),
                                           ops=("moe_gemm", "attn_mla_decode", "attn_prefill")))
    profile = load_profile(result.profile_path)
    assert {("moe_gemm", "bf16"), ("attn_mla_decode", "bf16"), ("attn_prefill", "bf16")} <= set(profile.curves)


def test_cuda_kernels_rehearse_on_the_cpu_and_cannot_be_installed(make_settings, monkeypatch, tmp_path):
    """impls=cuda on a CPU runs our Triton kernels under the interpreter (the GPU code path, toy sizes)."""
    monkeypatch.setitem(shapes.GRIDS, "tiny", dataclasses.replace(shapes.GRIDS["tiny"], tokens=(4,), sampled=(1,)))
    micro = dict(TINY_MODELS["tiny_gqa"], name="micro", hidden_size=128,
                 attention={"kind": "gqa", "num_heads": 2, "num_kv_heads": 1, "head_dim": 64},
                 ffn={"kind": "gated", "intermediate_size": 128})
    model = tmp_path / "micro.yaml"
    model.write_text(yaml.safe_dump(micro))
    settings = make_settings(impls="cuda", ops=("gemm",), dtypes=("int8",), budget_s=60, model=str(model))
    result = run_calibration(settings)
    rows = read_measurements(result.measurements_path)[0]
    assert {r["impl"] for r in rows if r["dtype"] == "int8"} == {"kernels.gemm_int8", "torch._int_mm"}
    assert result.rehearsal and json.loads(result.fit_path.read_text())["rehearsal"] is True
    assert result.report.impls_in_profile[("gemm", "int8")] == {"kernels.gemm_int8": sum(
        r["impl"] == "kernels.gemm_int8" for r in rows)}
    assert "gemm/int8/torch._int_mm" in result.report.ratio_to_primary
    with pytest.raises(InputError, match="rehearsal"):
        run_calibration(dataclasses.replace(settings, install=True))


def test_no_implementation_and_collectives_are_recorded_as_skipped(make_settings):
    result = run_calibration(make_settings(ops=("gemm", "allreduce"), dtypes=("fp8_block",), tp=2))
    assert "no cpu implementation of gemm/fp8_block" in result.skipped["gemm/fp8_block"]["reason"]
    assert "not timed on one device" in result.skipped["allreduce/bf16"]["reason"]
    fit = json.loads(result.fit_path.read_text())
    assert fit["sweep"]["skipped"]["allreduce/bf16"]["points"] > 0


def test_gpu_hardware_without_a_gpu_is_a_one_line_error(make_settings):
    with pytest.raises(InputError, match="no CUDA device is visible.*cpu_local"):
        run_calibration(make_settings(hardware="h200"))
    with pytest.raises(InputError, match="analytical-only"):
        run_calibration(make_settings(hardware="npu_generic"))
