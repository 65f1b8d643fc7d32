"""Arrival processes against their distributions.

Tolerances: each test draws enough arrivals that the statistic's standard error is well under a fifth of the
tolerance (the numbers are in the comments), so a correct generator fails with probability ~1e-6 or less, while a
wrong rate, CV or shape (errors of 10% and more) fails for sure. Seeds are fixed, so the tests are deterministic.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from scenarios.arrivals.client_windows import (GAMMA, NONE, WEIBULL, ClientWindows, client_window_arrivals,
                                               weibull_cv, weibull_shape_for_cv)
from scenarios.arrivals.flash_sale import FlashSale, with_flash_sales
from scenarios.arrivals.gamma import gamma_arrivals
from scenarios.arrivals.mmpp import mmpp_arrivals, mmpp_mean_rate
from scenarios.arrivals.nhpp import cumulative_rate, nhpp_arrivals
from scenarios.arrivals.poisson import poisson_arrivals
from scenarios.arrivals.rate_curve import constant_rate, harmonic_rate, piecewise_linear_rate, window_rate


def rng(seed=0):
    return np.random.default_rng(seed)


def cv(t):
    iat = np.diff(t)
    return iat.std() / iat.mean()


def test_poisson_rate_and_cv():
    t = poisson_arrivals(rng(), 50.0, 4000.0)  # expect 200,000 arrivals; count sd 447 = 0.22%
    assert np.all(np.diff(t) >= 0) and t[0] >= 0 and t[-1] < 4000.0
    assert len(t) / 4000.0 == pytest.approx(50.0, rel=0.02)
    assert cv(t) == pytest.approx(1.0, rel=0.02)  # exponential IATs; SE of the sample CV ~0.2% at n = 2e5


@pytest.mark.parametrize("target_cv", [0.5, 1.0, 2.0, 4.0])
def test_gamma_rate_and_cv(target_cv):
    rate, duration = 20.0, 10_000.0
    t = gamma_arrivals(rng(1), rate, target_cv, duration)
    assert np.all(np.diff(t) >= 0) and t[0] >= 0 and t[-1] < duration
    # Count sd ≈ cv·sqrt(n): 4·447 = 1,789 of 200,000 (0.9%) at cv 4, so 5% is > 5 sd.
    assert len(t) / duration == pytest.approx(rate, rel=0.05)
    # SE of the sample CV for Gamma(k = 1/cv²): ≈ cv·sqrt((2 + 6/k)/(4n)) ≤ 0.015·cv at cv 4, n = 2e5;
    # 6% is > 4 sd.
    assert cv(t) == pytest.approx(target_cv, rel=0.06)


def test_gamma_first_arrival_is_stationary():
    # A stationary renewal process has rate λ from t = 0 on: the mean count in [0, 1/λ) over many runs is 1,
    # whereas starting with a fresh IAT at t = 0 gives ≈ 3.7 for cv = 3 (measured), so the test can tell them apart.
    counts = [np.sum(gamma_arrivals(rng(s), 1.0, 3.0, 5.0) < 1.0) for s in range(4000)]
    assert np.mean(counts) == pytest.approx(1.0, abs=0.15)  # count sd ≈ 3 per run → SE 0.05


def test_mmpp_mean_rate_and_burstiness():
    rates, dwell = [1.0, 20.0], [60.0, 10.0]
    t = mmpp_arrivals(rng(2), rates, dwell, 500_000.0)
    mean = mmpp_mean_rate(rates, dwell)  # (60 + 200) / 70 = 3.714 req/s
    assert mean == pytest.approx(260 / 70)
    # ~7,000 on/off cycles: the time share of the busy state has SE ≈ 1.2%, so 5% on the rate is > 4 sd.
    assert len(t) / 500_000.0 == pytest.approx(mean, rel=0.05)
    assert cv(t) > 1.5  # modulation makes IATs far more variable than Poisson (CV 1)


def test_mmpp_three_states_time_shares():
    rates, dwell = [0.0, 10.0, 100.0], [100.0, 50.0, 5.0]
    t = mmpp_arrivals(rng(3), rates, dwell, 1_000_000.0)
    assert len(t) / 1e6 == pytest.approx(mmpp_mean_rate(rates, dwell), rel=0.05)


def test_nhpp_follows_a_piecewise_linear_day():
    hourly = [2, 1, 1, 1, 1, 2, 4, 8, 12, 14, 15, 15, 14, 14, 15, 15, 14, 13, 14, 16, 18, 16, 10, 5]
    curve = piecewise_linear_rate(hourly)
    t = nhpp_arrivals(rng(4), curve, 86_400.0)
    counts = np.histogram(t, bins=24, range=(0, 86_400))[0]
    grid, cum = cumulative_rate(curve, 86_400.0, 1.0)
    expected = np.diff(cum[::3600])
    # Each hour's count is Poisson(expected): 5 sd on each of 24 bins.
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected) + 1)
    assert curve(np.array([3600.0 * 9.5]))[0] == pytest.approx(14.5)  # linear between 09:00 and 10:00
    assert curve(np.array([86_400.0 + 3600.0]))[0] == pytest.approx(1.0)  # periodic


def test_harmonics_peak_and_mean():
    curve = harmonic_rate(10.0, [(0.5, 86_400.0, 72_000.0)])
    assert curve(np.array([72_000.0]))[0] == pytest.approx(15.0)
    assert curve(np.array([72_000.0 - 43_200.0]))[0] == pytest.approx(5.0)
    _, cum = cumulative_rate(curve, 86_400.0, 1.0)
    assert cum[-1] / 86_400.0 == pytest.approx(10.0, rel=1e-6)  # cosines integrate to 0 over a period


def test_window_rate_is_stepwise_and_periodic():
    curve = window_rate([0, 600, 1200], [1.0, 5.0, 2.0], 600.0)
    assert curve(np.array([0.0, 599.9, 600.0, 1799.0, 1800.0, 2400.0])).tolist() == [1, 1, 5, 2, 1, 5]


def test_flash_sale_shape_and_peak_ratio():
    sale = FlashSale(start_s=3600.0, ramp_s=300.0, hold_s=900.0, decay_s=600.0, peak_multiplier=8.0)
    mult = 1.0 + sale.excess(np.array([0.0, 3600.0, 3750.0, 3900.0, 4800.0, 5400.0]))
    assert mult.tolist() == pytest.approx([1.0, 1.0, 4.5, 8.0, 8.0, 1.0 + 7.0 / math.e])
    rate = with_flash_sales(constant_rate(10.0), [sale])
    t = nhpp_arrivals(rng(5), rate, 10_000.0)
    before = np.sum(t < 3600.0) / 3600.0  # 36,000 arrivals: SE 0.5%
    hold = np.sum((t >= 3900.0) & (t < 4800.0)) / 900.0  # 72,000 arrivals: SE 0.4%
    assert before == pytest.approx(10.0, rel=0.03)
    assert hold / before == pytest.approx(8.0, rel=0.04)  # ratio SE ≈ 0.65%; 4% is > 6 sd
    late = np.sum(t >= 9000.0) / 1000.0  # back near the base rate 40 min after the hold (excess 7e^-7 ≈ 0.6%)
    assert late == pytest.approx(10.0, rel=0.1)


def test_flash_sales_add_their_excesses():
    a = FlashSale(100.0, 0.0, 100.0, 10.0, 3.0)
    rate = with_flash_sales(constant_rate(1.0), [a, a])
    assert rate(np.array([150.0]))[0] == pytest.approx(5.0)  # 1 + 2 + 2, not 3 × 3


@pytest.mark.parametrize("target", [0.5, 1.0, 2.0, 5.0])
def test_weibull_shape_for_cv_inverts(target):
    assert weibull_cv(weibull_shape_for_cv(target)) == pytest.approx(target, rel=1e-6)


def _cw(rate, pattern, shape, windows=40):
    return ClientWindows(("a",), np.arange(windows) * 600.0, 600.0, np.full((1, windows), rate),
                         np.full((1, windows), pattern, dtype=np.int8), np.full((1, windows), shape))


@pytest.mark.parametrize("pattern,shape,expected_cv", [(GAMMA, 0.25, 2.0), (WEIBULL, weibull_shape_for_cv(1.5), 1.5)])
def test_client_windows_rate_and_cv(pattern, shape, expected_cv):
    cw = _cw(10.0, pattern, shape)
    t, client = client_window_arrivals(rng(6), cw, 0.0, cw.span_s)
    assert np.all(client == 0) and np.all(np.diff(t) >= 0)
    # 240,000 expected arrivals; count sd ≈ cv·sqrt(n) ≈ 0.4%; 4% is 10 sd.
    assert len(t) / cw.span_s == pytest.approx(10.0, rel=0.04)
    in_window = np.diff(t)[np.diff(t // 600.0) == 0]  # IATs not straddling a window edge
    assert in_window.std() / in_window.mean() == pytest.approx(expected_cv, rel=0.08)


def test_client_windows_superpose_clients_and_skip_inactive():
    rates = np.array([[5.0, 0.0, 5.0], [1.0, 1.0, 0.0]])
    pattern = np.array([[GAMMA, NONE, GAMMA], [GAMMA, GAMMA, NONE]], dtype=np.int8)
    cw = ClientWindows(("x", "y"), np.array([0.0, 600.0, 1200.0]), 600.0, rates, pattern, np.ones((2, 3)))
    t, client = client_window_arrivals(rng(7), cw, 0.0, 1800.0)
    assert not np.any((client == 0) & (t >= 600) & (t < 1200))  # x is off in window 1
    assert not np.any((client == 1) & (t >= 1200))  # y is off in window 2
    assert np.sum(client == 0) == pytest.approx(6000, rel=0.1)  # sd 77 → 10% is 8 sd
    # a sub-range of the data's time axis comes back relative to its start
    t2, _ = client_window_arrivals(rng(7), cw, 600.0, 600.0)
    assert t2.min() >= 0 and t2.max() < 600.0 and len(t2) == pytest.approx(600, rel=0.25)
