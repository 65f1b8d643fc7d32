"""The ITL sketch is DDSketch(0.01) computed the same way: identical quantiles and mean, float for float, for
weighted adds, zeros and negatives, merges (into empty and non-empty sketches), and its relative-accuracy bound."""
from __future__ import annotations

import math
import random

import pytest

from sim.core.instance.itl import RELATIVE_ACCURACY, ItlSketch

ddsketch = pytest.importorskip("ddsketch")
QS = (0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0)


def _gaps(seed: int, n: int) -> list[tuple[float, float]]:
    """Gaps as the instance adds them: mostly decode-step-like (ms), some long stalls, zeros, repeats, weights."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.05:
            gap = 0.0
        elif r < 0.07:
            gap = -1e-12  # a float-rounding negative: counted as zero
        elif r < 0.9:
            gap = rng.lognormvariate(math.log(0.03), 0.4)
        else:
            gap = rng.lognormvariate(math.log(2.0), 1.5)
        out.append((gap, float(rng.choice((1, 1, 1, 3, 17, 128)))))
    return out


def _pair(gaps):
    ours, ref = ItlSketch(), ddsketch.DDSketch(relative_accuracy=0.01)
    for gap, w in gaps:
        ours.add(gap, w)
        ref.add(max(gap, 0.0), w)
    return ours, ref


def _assert_same(ours: ItlSketch, ref) -> None:
    assert ours.count == ref.count
    for q in QS:
        assert ours.quantile_s(q) == float(ref.get_quantile_value(q)), q
    s = ours.summary()
    assert s["mean"] == float(ref.sum / ref.count)
    assert (s["p50"], s["p90"], s["p99"]) == tuple(float(ref.get_quantile_value(q)) for q in (0.5, 0.9, 0.99))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_identical_to_ddsketch(seed):
    _assert_same(*_pair(_gaps(seed, 5_000)))


def test_merge_identical_to_ddsketch():
    parts = [_pair(_gaps(s, 1_500)) for s in (10, 11, 12)]
    ours, ref = ItlSketch(), ddsketch.DDSketch(relative_accuracy=0.01)
    ours.merge(ItlSketch())  # empty into empty: still empty
    assert math.isnan(ours.summary()["p50"])
    for o, r in parts:
        ours.merge(o)
        ref.merge(r)
    _assert_same(ours, ref)


def test_relative_accuracy_bound():
    """Every quantile is within 1% of the exact gap of that rank (lower-rank convention, as DDSketch)."""
    values = sorted(random.Random(5).lognormvariate(math.log(0.02), 1.0) for _ in range(20_001))
    sk = ItlSketch()
    for v in values:
        sk.add(v)
    for q in (0.001, 0.1, 0.5, 0.9, 0.99, 0.999):
        exact = values[int(q * (len(values) - 1))]
        assert abs(sk.quantile_s(q) - exact) <= RELATIVE_ACCURACY * exact, q


def test_only_zeros():
    sk = ItlSketch()
    sk.add(0.0, 4.0)
    sk.add(-3.0)
    assert sk.summary() == {"p50": 0.0, "p90": 0.0, "p99": 0.0, "mean": 0.0}


def test_runs_of_equal_gaps_and_shared_buckets_identical_to_ddsketch():
    """What the instance adds most: the same gap for every member of a run, then gaps that differ but fall in the
    bucket before (their weight waits in the pending bucket), interleaved with reads (merge, quantile)."""
    rng = random.Random(7)
    ours, ref = ItlSketch(), ddsketch.DDSketch(relative_accuracy=0.01)
    for block in range(300):
        gap = rng.choice((0.021, 0.0211, 0.0212, 0.35, 0.0, 1.0, 2e-7))
        for _ in range(rng.randint(1, 40)):
            w = float(rng.choice((1, 1, 2, 64)))
            ours.add(gap, w)
            ref.add(gap, w)
        if block % 50 == 0:  # a read in the middle settles the pending weight; later adds go on from there
            assert ours.quantile_s(0.5) == float(ref.get_quantile_value(0.5))
    _assert_same(ours, ref)
    other, ref_other = ItlSketch(), ddsketch.DDSketch(relative_accuracy=0.01)
    other.add(0.021, 5.0)
    ref_other.add(0.021, 5.0)
    ours.merge(other)  # (the other sketch's pending weight is settled before its buckets are read)
    ref.merge(ref_other)
    _assert_same(ours, ref)
