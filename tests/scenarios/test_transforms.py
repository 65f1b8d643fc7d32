"""Transformations: exact ones checked exactly, random ones against their expected counts."""
from __future__ import annotations

import numpy as np
import pytest

from scenarios.arrivals.poisson import poisson_arrivals
from scenarios.transforms import (assign_classes, classes_by_length, classes_by_weight, clip_lengths, limit,
                                  scale_rate, scale_time, time_window, window_of)
from scenarios.workload import Workload


def poisson_workload(n_rate=20.0, duration=5000.0, seed=0):
    rng = np.random.default_rng(seed)
    t = poisson_arrivals(rng, n_rate, duration)
    return Workload.from_columns(t, rng.integers(1, 4000, t.size), rng.integers(1, 500, t.size),
                                 metadata={"duration_s": duration})


def small():
    return Workload.from_columns([0.5, 1.0, 2.0, 3.0], [100, 600, 1100, 2000], [5, 6, 7, 8],
                                 session_id=[-1, 3, 3, -1], hash_block_tokens=512,
                                 prefix_hashes=[np.array([], dtype=np.int64), np.array([1]), np.array([1, 2]),
                                                np.array([4, 5, 6])])


def test_time_window_is_exact():
    wl = time_window(small(), 1.0, 3.0)
    assert wl.arrival_s.tolist() == [0.0, 1.0] and wl.prompt_tokens.tolist() == [600, 1100]
    assert [h.tolist() for h in wl.prefix_hashes] == [[1], [1, 2]]
    assert time_window(small(), 1.0, 3.0, rebase=False).arrival_s.tolist() == [1.0, 2.0]
    assert wl.metadata["duration_s"] == 2.0


def test_scale_time_is_exact():
    wl = scale_time(small(), 0.5)
    assert wl.arrival_s.tolist() == [0.25, 0.5, 1.0, 1.5]
    assert np.array_equal(wl.prompt_tokens, small().prompt_tokens)


def test_clip_lengths_cuts_hashes():
    wl = clip_lengths(small(), max_prompt_tokens=1000, max_output_tokens=6)
    assert wl.prompt_tokens.tolist() == [100, 600, 1000, 1000] and wl.output_tokens.tolist() == [5, 6, 6, 6]
    assert [len(h) for h in wl.prefix_hashes] == [0, 1, 2, 2]  # at most ceil(1000 / 512) = 2


def test_limit():
    assert len(limit(small(), 2)) == 2 and limit(small(), 2).arrival_s.tolist() == [0.5, 1.0]


@pytest.mark.parametrize("factor", [0.5, 2.0, 2.5, 0.1])
def test_scale_rate_count(factor):
    wl = poisson_workload()  # ~100,000 requests
    out = scale_rate(wl, factor, np.random.default_rng(1))
    # Thinning keeps Binomial(n, frac) requests: SE ≤ 0.5·sqrt(n) ≈ 160 of 100,000 (0.16%); whole copies are exact.
    assert len(out) == pytest.approx(factor * len(wl), rel=0.01)
    assert out.arrival_s.min() >= 0 and out.arrival_s.max() < window_of(wl)[1]  # copies wrap inside the window
    assert np.all(np.diff(out.arrival_s) >= 0)
    if factor >= 1:  # every hour of the doubled trace carries about double the load (copies are spread out)
        per_bin = np.histogram(out.arrival_s, bins=10, range=(0, 5000))[0]
        assert per_bin == pytest.approx(np.full(10, factor * len(wl) / 10), rel=0.05)


def test_scale_rate_keeps_sessions_whole_and_remaps_hashes():
    n = 4000
    hashes = [np.array([i // 4 + 10, 7]) for i in range(n)]  # a private block per session + a shared block 7
    wl = Workload.from_columns(np.arange(n, dtype=float), np.full(n, 1024), np.full(n, 10),
                               session_id=np.arange(n) // 4, prefix_hashes=hashes,
                               metadata={"duration_s": float(n)})
    half = scale_rate(wl, 0.5, np.random.default_rng(2))
    assert set(np.bincount(half.session_id)[np.unique(half.session_id)].tolist()) == {4}
    double = scale_rate(wl, 2.0, np.random.default_rng(2))
    assert len(double) == 2 * n and np.unique(double.session_id).size == 2 * n // 4
    all_hashes = np.concatenate(double.prefix_hashes)
    assert np.unique(all_hashes).size == 2 * (n // 4 + 1)  # the copy's blocks are new, including the shared 7
    kept = scale_rate(wl, 2.0, np.random.default_rng(2), remap_hashes=False)
    assert np.unique(np.concatenate(kept.prefix_hashes)).size == n // 4 + 1


def test_classes_by_weight_and_by_length():
    wl = poisson_workload()
    idx = classes_by_weight(wl, np.random.default_rng(3), [0.7, 0.3])
    assert np.mean(idx == 0) == pytest.approx(0.7, abs=0.01)  # SE 0.15%
    out = assign_classes(wl, idx, ["chat", "batch"], {"chat": 2})
    assert out.class_names == ("chat", "batch") and set(out.priority[out.request_class == 0].tolist()) == {2}
    assert set(out.priority[out.request_class == 1].tolist()) == {0}
    by = classes_by_length(small(), "prompt_tokens", [600, 2000])
    assert by.tolist() == [0, 1, 1, 2]  # [0, 600), [600, 2000), [2000, ∞)
