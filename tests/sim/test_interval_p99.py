"""`interval_p99` (all intervals at once, in spans of whole intervals) equals `np.percentile(group, 99)` per
interval, float for float, however the rows are spanned."""
from __future__ import annotations

import numpy as np
import pytest

from sim.results.write import interval_p99


def _reference(times, values, edges):
    """The per-interval definition: each interval's finite values, np.percentile(., 99)."""
    out = np.full(len(edges), np.nan)
    ok = np.isfinite(times) & np.isfinite(values)
    idx = np.searchsorted(edges, times[ok], side="left")
    vals = values[ok]
    for g in np.unique(idx):
        if g < len(edges):
            out[g] = np.percentile(vals[idx == g], 99)
    return out


@pytest.mark.parametrize("seed, rows_per_chunk", [(0, 1 << 20), (1, 1 << 20), (2, 1 << 20), (3, 1 << 20),
                                                  (0, 1), (1, 7), (2, 100), (3, 999)])
def test_equals_percentile_per_interval(seed, rows_per_chunk):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    times = rng.uniform(0, 120, n)
    times[rng.random(n) < 0.05] = np.nan          # requests without a first token / finish
    values = rng.lognormal(-2, 1.0, n)
    values[rng.random(n) < 0.03] = np.nan
    values[: n // 10] = np.round(values[: n // 10], 2)  # ties
    edges = np.arange(1.0, 100.0 + 1)            # values after the last edge are dropped
    np.testing.assert_array_equal(interval_p99(times, values, edges, rows_per_chunk),
                                  _reference(times, values, edges))


def test_sparse_groups_of_one_and_two():
    times = np.array([0.5, 3.2, 3.7, 7.0, 7.0, 7.0, 50.0])
    values = np.array([0.3, 0.1, 0.2, 5.0, 1.0, 3.0, 9.0])
    edges = np.arange(1.0, 11.0)
    got = interval_p99(times, values, edges)
    np.testing.assert_array_equal(got, _reference(times, values, edges))
    assert got[0] == 0.3 and np.isnan(got[1])


def test_nothing_finite():
    assert np.isnan(interval_p99(np.array([np.nan]), np.array([1.0]), np.arange(1.0, 4.0))).all()
