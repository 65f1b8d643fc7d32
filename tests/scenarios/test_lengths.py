"""Length distributions: parameters → moments and quantiles, clipping, joint resampling, per-side streams.

n = 200,000 draws per check: the relative SE of a lognormal mean with σ = 0.9 is sqrt(e^σ² − 1)/sqrt(n) ≈ 0.25%,
of its median ≈ 0.3% and of its p99 ≈ 0.5%, so 2–3% tolerances are > 5 SE; a wrong parametrisation (e.g.
using `mean` as the median) is off by ≥ 30%.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from scenarios.config_reader import ConfigReader
from scenarios.length_config import lengths_from_config, token_dist
from scenarios.lengths import Z99, Clipped, Empirical, Fixed, Independent, LogNormal, Pmf, Uniform
from scenarios.rng import Streams
from inferplan.errors import InputError

N = 200_000


def rng():
    return np.random.default_rng(11)


def test_lognormal_from_median_and_p99():
    x = LogNormal.from_median_p99(1000, 8000).sample(rng(), N)
    assert x.dtype == np.int64 and x.min() >= 1
    assert np.median(x) == pytest.approx(1000, rel=0.02)
    assert np.quantile(x, 0.99) == pytest.approx(8000, rel=0.03)


def test_lognormal_from_mean_and_sigma():
    d = LogNormal.from_mean(200, 0.9)
    x = d.sample(rng(), N)
    assert x.mean() == pytest.approx(200, rel=0.02)
    assert np.log(np.maximum(x, 1)).std() == pytest.approx(0.9, rel=0.03)
    assert d.mean() == pytest.approx(200)
    assert d.mu == pytest.approx(math.log(200) - 0.405)


def test_max_tokens_clips():
    x = LogNormal.from_median_p99(1000, 8000, max_tokens=2000).sample(rng(), N)
    assert x.max() == 2000 and np.mean(x == 2000) == pytest.approx(0.2, abs=0.02)  # P(X > 2000) = 1 − Φ(0.777)


def test_fixed_uniform_pmf():
    assert Fixed(7).sample(rng(), 3).tolist() == [7, 7, 7]
    u = Uniform(3, 5).sample(rng(), N)
    assert set(np.unique(u).tolist()) == {3, 4, 5}
    p = Pmf.from_probs([10, 20], [1, 3]).sample(rng(), N)
    assert np.mean(p == 20) == pytest.approx(0.75, abs=0.01)  # SE 0.1%


def test_empirical_resamples_pairs_jointly():
    e = Empirical(np.array([100, 5000]), np.array([1, 900]))
    p, o = e.sample(Streams(0), np.zeros(1000))
    assert set(zip(p.tolist(), o.tolist())) == {(100, 1), (5000, 900)}


def test_sides_use_their_own_streams():
    a = Independent(LogNormal.from_mean(500, 1.0), Fixed(10))
    b = Independent(LogNormal.from_mean(500, 1.0), LogNormal.from_mean(100, 0.5))
    pa, _ = a.sample(Streams(3), np.zeros(100))
    pb, _ = b.sample(Streams(3), np.zeros(100))
    assert np.array_equal(pa, pb)  # changing the output law leaves prompts unchanged


def test_clipped_sampler():
    c = Clipped(Independent(Fixed(5000), Fixed(900)), 4096, 512)
    p, o = c.sample(Streams(0), np.zeros(4))
    assert p.tolist() == [4096] * 4 and o.tolist() == [512] * 4


def parse(cfg):
    return lengths_from_config(ConfigReader(cfg, where="traffic.lengths"))


def test_config_kinds():
    p, o = parse({"kind": "fixed", "prompt_tokens": 10, "output_tokens": 3}).sample(Streams(0), np.zeros(2))
    assert p.tolist() == [10, 10] and o.tolist() == [3, 3]
    s = parse({"kind": "lognormal", "prompt": {"median_tokens": 100, "p99_tokens": 1000},
               "output": {"mean_tokens": 50, "sigma": 0.5}, "max_prompt_tokens": 500})
    p, o = s.sample(Streams(0), np.zeros(N))
    assert p.max() == 500 and o.mean() == pytest.approx(50, rel=0.02)
    s = parse({"kind": "independent", "prompt": {"kind": "uniform", "low_tokens": 1, "high_tokens": 3},
               "output": {"kind": "pmf", "values": [4], "probs": [1]}})
    p, o = s.sample(Streams(0), np.zeros(10))
    assert p.max() <= 3 and o.tolist() == [4] * 10


def test_lognormal_needs_exactly_one_pair():
    with pytest.raises(InputError, match=r"traffic\.lengths\.prompt\.\(keys\): a lognormal needs exactly one "
                                         r"pair: mean_tokens \+ sigma, median_tokens \+ p99_tokens, or "
                                         r"median_tokens \+ sigma"):
        parse({"kind": "lognormal", "prompt": {"mean_tokens": 100, "p99_tokens": 1000},
               "output": {"mean_tokens": 50, "sigma": 0.5}})


def test_unknown_length_kind_lists_choices():
    with pytest.raises(InputError) as err:
        parse({"kind": "gaussian"})
    assert str(err.value) == ("traffic: traffic.lengths.kind: unknown kind 'gaussian' "
                              "(fix: use one of: fixed, lognormal, independent, empirical, servegen)")


def test_unknown_side_key():
    with pytest.raises(InputError, match=r"traffic\.lengths\.output\.mean: unknown key \(fix: valid keys: "
                                         r"kind, mean_tokens, median_tokens, p99_tokens, sigma, max_tokens\)"):
        token_dist(ConfigReader({"kind": "lognormal", "mean": 3, "mean_tokens": 3, "sigma": 1},
                                where="traffic.lengths.output"))


def test_z99():
    assert Z99 == pytest.approx(2.3263478740408408)


def test_lognormal_median_and_sigma_and_the_flat_form():
    d = LogNormal(math.log(512), 1.0)
    x = d.sample(rng(), N)
    assert np.median(x) == pytest.approx(512, rel=0.02)  # SE of the median ≈ 0.3%
    flat = parse({"kind": "lognormal", "prompt_median_tokens": 512, "prompt_sigma": 1.0,
                  "output_median_tokens": 128, "output_sigma": 0.8, "max_prompt_tokens": 6144})
    nested = parse({"kind": "lognormal", "prompt": {"median_tokens": 512, "sigma": 1.0},
                    "output": {"median_tokens": 128, "sigma": 0.8}, "max_prompt_tokens": 6144})
    a, b = flat.sample(Streams(1), np.zeros(1000)), nested.sample(Streams(1), np.zeros(1000))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    with pytest.raises(InputError, match=r"traffic\.lengths\.prompt: is given both as a `prompt:` block and as"):
        parse({"kind": "lognormal", "prompt_median_tokens": 5, "prompt": {"median_tokens": 5, "sigma": 1},
               "output": {"median_tokens": 5, "sigma": 1}})
