"""The cost-model fit: recovers known curves, reports error only on shapes it did not see, ships valid knots."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrate.fit import (fit_curve, fit_measurements, fit_rows, held_out_shapes, profile_rows,
                           relative_errors_pct)
from calibrate.profile import EfficiencyCurve, load_profile, write_profile

TRUE = EfficiencyCurve((1e-6, 1e-4, 1e-2), (0.2, 0.6, 0.8), 5e-6)


def synthetic_rows(n: int = 41, curve: EfficiencyCurve = TRUE, noise: float = 0.0, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i, r in enumerate(np.logspace(-7, -1.5, n)):
        t = curve.time_s(float(r)) * math.exp(rng.normal(0.0, noise)) if noise else curve.time_s(float(r))
        rows.append({"op": "gemm", "dtype": "bf16", "impl": "torch.matmul", "primary": True, "shape": f"m={i}",
                     "roofline_s": float(r), "measured_s": t})
    return rows


def test_recovers_a_known_curve():
    rows = synthetic_rows()
    curve = fit_curve(np.array([r["roofline_s"] for r in rows]), np.array([r["measured_s"] for r in rows]))
    err = relative_errors_pct(curve, [r["roofline_s"] for r in rows], [r["measured_s"] for r in rows])
    # The fit's knots sit at data quantiles, not at the true curve's kinks (1e-6, 1e-4, 1e-2): a small shape error.
    assert np.mean(np.abs(err)) < 1.5 and max(abs(e) for e in err) < 5.0
    assert curve.launch_s == pytest.approx(5e-6, rel=0.1)


def test_held_out_split_is_every_kth_shape_by_size_never_the_ends():
    rows = synthetic_rows(n=10)
    held = held_out_shapes(list(reversed(rows)), every=4)  # input order does not matter
    assert held == {("gemm", "bf16", "m=2"), ("gemm", "bf16", "m=6")}
    assert held_out_shapes(rows, every=4) == held


def test_error_is_computed_only_on_points_the_fit_did_not_see():
    """Corrupting held-out measurements leaves the fitted curve untouched and moves the reported error by exactly
    the corruption; corrupting a training point changes the curve."""
    rows = synthetic_rows()
    held = held_out_shapes(rows, every=4)
    clean = fit_rows(rows, held)
    corrupt = [dict(r, measured_s=r["measured_s"] / 1.5) if (r["op"], r["dtype"], r["shape"]) in held else r
               for r in rows]
    dirty = fit_rows(corrupt, held)
    assert dirty.curve == clean.curve
    assert dirty.train_mape_pct == clean.train_mape_pct
    assert dirty.n_held_out == len(held) == 10  # shapes 2, 6, ..., 38 of 41
    # predictions ~= true times, measured = true / 1.5: error ~ +50%
    assert dirty.held_out_mape_pct == pytest.approx(50.0, abs=3.0)
    assert clean.held_out_mape_pct < 3.0
    train_idx = next(i for i, r in enumerate(rows) if (r["op"], r["dtype"], r["shape"]) not in held and i > 3)
    moved = [dict(r, measured_s=r["measured_s"] * 3) if i == train_idx else r for i, r in enumerate(rows)]
    assert fit_rows(moved, held).curve != clean.curve


def test_fit_measurements_marks_rows_and_prefers_the_primary_implementation():
    rows = synthetic_rows(n=12)
    baseline = [dict(r, impl="lib", primary=False, measured_s=r["measured_s"] * 2) for r in rows]
    only_baseline = dict(baseline[0], shape="m=99", roofline_s=0.5, measured_s=0.9)
    all_rows = rows + baseline + [only_baseline]
    report = fit_measurements(all_rows, holdout_every=4)
    assert report.impls_in_profile[("gemm", "bf16")] == {"torch.matmul": 12, "lib": 1}
    assert report.ratio_to_primary["gemm/bf16/lib"] == pytest.approx(2.0)
    assert set(report.by_impl) == {"gemm/bf16/torch.matmul", "gemm/bf16/lib"}
    assert sum(r["in_profile"] for r in all_rows) == 13
    assert all(np.isfinite(r["predicted_s"]) for r in all_rows)
    series = profile_rows(all_rows)[("gemm", "bf16")]
    assert [r["impl"] for r in series].count("lib") == 1


def test_tiny_groups_fit_without_a_launch_term():
    rows = synthetic_rows(n=2)
    curve = fit_rows(rows, set()).curve
    assert curve.launch_s == 0.0 and len(curve.efficiency) == 1


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.floats(1e-8, 1e-1), st.floats(0.05, 50.0)), min_size=1, max_size=40))
def test_any_data_gives_a_curve_the_profile_accepts(tmp_path_factory, points):
    """Whatever the measurements, knots increase strictly, efficiency is in (0, 2], launch >= 0: loadable."""
    r = np.array([p[0] for p in points])
    t = r * np.array([p[1] for p in points]) + 1e-6
    curve = fit_curve(r, t)
    assert all(b > a for a, b in zip(curve.roofline_s, curve.roofline_s[1:]))
    assert all(0 < e <= 2 for e in curve.efficiency) and curve.launch_s >= 0
    path = tmp_path_factory.mktemp("p") / "hw.parquet"
    rows = [{"op": "gemm", "dtype": "bf16", "roofline_s": x, "efficiency": e, "launch_s": curve.launch_s}
            for x, e in zip(curve.roofline_s, curve.efficiency)]
    write_profile(path, rows, {"hardware": "hw", "device": "d", "date": "today",
                               "peaks": {"flops_per_s": {"bf16": 1e12}, "mem_bytes_per_s": 1e11}})
    assert load_profile(path).curve("gemm", "bf16") == curve


def test_identical_points_fit_without_a_singular_step():
    """Repeated measurements of one shape (hypothesis found it): the damped step must not fail on a singular
    normal matrix, and the curve goes through the points."""
    r = np.full(3, 0.0625)
    t = r + 1e-6
    curve = fit_curve(r, t)
    assert curve.time_s(0.0625) == pytest.approx(0.0625 + 1e-6, rel=1e-3)
