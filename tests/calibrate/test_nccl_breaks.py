"""The NCCL segment fit's breaks (`calibrate.nccl_fit`): exact search over the training sizes, count by inner
cross-validation, held-out rows never seen."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibrate import nccl_fit
from calibrate.hopper_fit import split
from calibrate.vidur import ReferencePoint

BW = 3e11
MIB = 2.0 ** 20


def _point(nbytes: float, t: float, ranks: int = 16) -> ReferencePoint:
    return ReferencePoint("network/x/all_reduce.csv", "x", "a100_80gb", ranks, "all_reduce (inter)", "allreduce",
                          "bf16", f"bytes={int(nbytes)},ranks={ranks},per_node=8", 0.0, float(nbytes), t, "inter")


def _ring(nbytes: float, floor: float, eff: float, ranks: int = 16) -> float:
    return floor + 2.0 * (ranks - 1) / ranks * nbytes / (BW * eff)


def _window_table() -> list[ReferencePoint]:
    """Sizes 8-40 MiB every 1/8 MiB; one law except 16-19.75 MiB at twice the time (as a100_80gb inter TP16
    reads), with +-1% alternating noise."""
    rows = []
    for i, mib in enumerate(np.arange(8.0, 40.0, 0.125)):
        t = _ring(mib * MIB, 150e-6, 0.6) * (2.0 if 16.0 <= mib < 20.0 else 1.0)
        rows.append(_point(mib * MIB, t * (1.01 if i % 2 else 0.99)))
    return rows


def test_a_regime_bounded_on_both_sides_is_found_from_training_sizes_only():
    """One break at a time never pays for a window (a line through 2x-then-1x fits as badly as before); the exact
    search finds both of its edges, and the held-out rows inside it are priced like the rest."""
    rows = _window_table()
    tr, ho = split(rows, lambda p: p.bytes, fold=1)
    segs = nccl_fit.fit_segments([rows[i] for i in tr], 16, BW)
    tops = [m / MIB for m, _, _ in segs[:-1]]
    assert any(15.75 <= m < 16.0 for m in tops) and any(19.5 <= m < 20.0 for m in tops)
    held = [rows[i] for i in ho]
    window = [p for p in held if 16 * MIB <= p.bytes < 20 * MIB]
    assert window and max(abs(nccl_fit.predict(segs, p, BW) / p.measured_s - 1) for p in window) < 0.03
    assert np.mean([abs(nccl_fit.predict(segs, p, BW) / p.measured_s - 1) for p in held]) < 0.02


def test_one_law_keeps_one_segment():
    """Inner cross-validation, not the training error, sets the count: extra breaks on one law with 1% noise
    lower the training error a little and the cross-validated error not at all."""
    rows = [_point(mib * MIB, _ring(mib * MIB, 80e-6, 0.7) * (1.01 if i % 2 else 0.99))
            for i, mib in enumerate(np.arange(1.0, 40.0, 0.25))]
    tr, _ = split(rows, lambda p: p.bytes, fold=1)
    segs = nccl_fit.fit_segments([rows[i] for i in tr], 16, BW)
    assert len(segs) == 1 and segs[0][0] == float("inf")
    assert segs[0][1] == pytest.approx(80e-6, rel=0.05) and segs[0][2] == pytest.approx(0.7, rel=0.02)


def _write_network(root: Path, scale_held: float) -> Path:
    """A Vidur-format a100_dgx table (intra-node TP2, sizes 1-40 MiB, a 2x window at 16-19.75 MiB); the rows
    `calibrate.hopper_fit.split` holds out (every third by size from the second) scaled by `scale_held`."""
    sizes = np.arange(1.0, 40.0, 0.125) * MIB
    held = set(split(list(sizes), float, fold=1)[1])
    rows = []
    for i, s in enumerate(sizes):
        t = (_ring(s, 40e-6, 0.7, ranks=2) * (2.0 if 16 * MIB <= s < 20 * MIB else 1.0) * 1e3
             * (scale_held if i in held else 1.0))  # ms
        rows.append({"rank": 0, "num_workers": 2, "size": int(s), "collective": "all_reduce", "devices_per_node": 8,
                     "max_devices_per_node": 8, "time_stats.all_reduce.min": t, "time_stats.all_reduce.median": t,
                     "time_stats.all_reduce.max": t, "time_stats.all_reduce.mean": t, "time_stats.all_reduce.std": 0.0})
    path = root / "network" / "a100_dgx" / "all_reduce.csv"
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return root


def test_held_out_rows_play_no_part(tmp_path):
    """`fit` on a table, and on the same table with every held-out time tripled: the same segments."""
    a, _ = nccl_fit.fit(str(_write_network(tmp_path / "a", 1.0)))
    b, lines = nccl_fit.fit(str(_write_network(tmp_path / "b", 3.0)))
    assert a["segments"] == b["segments"] and len(a["segments"]["a100_80gb"]["intra"][2]) >= 3
    assert lines[0]["after"] == pytest.approx(100 * 2 / 3, rel=0.01)   # priced as the untouched law: 1/3 of 3x


def test_batched_segment_fits_match_one_at_a_time():
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(1e-6, 1e-4, 40))
    t = (20e-6 + 1.3 * x) * rng.uniform(0.9, 1.1, 40)
    masks = np.zeros((3, 40), bool)
    masks[0, :10], masks[1, 10:], masks[2, 5:30] = True, True, True
    floor, g, cost = nccl_fit._fit_many(x, t, masks)
    for k in range(3):
        f1, g1, c1 = nccl_fit._fit_many(x[masks[k]], t[masks[k]], np.ones((1, int(masks[k].sum())), bool))
        assert (floor[k], g[k], cost[k]) == pytest.approx((f1[0], g1[0], c1[0]), rel=1e-9)
    assert np.all(floor >= 0) and np.all(g >= 0)
