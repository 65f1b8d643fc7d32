"""Prefill attention's causal factor, the NCCL segment fit's L1 weighting and the all-reduce band table."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from calibrate import allreduce_bands, nccl_fit
from calibrate.ampere_fit import prefill_seq_share
from calibrate.efficiency import PrefillForm, load_generation
from calibrate.vidur import ReferencePoint

PEAK, BW = 312e12, 2.0e12


def test_causal_factor_one_is_the_old_form_exactly():
    old = PrefillForm(0.4, 900.0, 5e-6)
    new = PrefillForm(0.4, 900.0, 5e-6, 1.0)
    for share in (0.0, 0.3, 1.0):
        assert new.time_s(1e12, 1e8, 1500.0, PEAK, BW, 1.0, share) == old.time_s(1e12, 1e8, 1500.0, PEAK, BW)


def test_causal_factor_prices_new_token_pairs_at_kappa_times_a_context_pair():
    """q new tokens after c cached, per head-dim unit: time - launch must be (q c + k q(q+1)/2 + s0 q) / rate."""
    e, s0, k = 0.45, 600.0, 2.0
    form = PrefillForm(e, s0, 0.0, k)
    hd4 = 4.0 * 32 * 128
    for q, c in ((4096, 0), (512, 2048), (64, 0)):
        seq, share = prefill_seq_share({"q": q, "c": c})
        flops = hd4 * (q * c + q * (q + 1) / 2)
        want = hd4 * (q * c + k * q * (q + 1) / 2 + s0 * q) / (PEAK * e)
        assert form.time_s(flops, 0.0, seq, PEAK, BW, 1.0, share) == pytest.approx(want, rel=1e-12)


def test_shipped_generations_price_engines_with_skipped_masked_tiles():
    """The simulator's prefill forms use k = 1 (the engines' kernels stop at the diagonal); the Vidur profiler's
    fitted k lives apart, for calibrate.crosscheck."""
    for name in ("ampere", "hopper"):
        g = load_generation(name)
        assert g is not None and g.attn_prefill is not None and g.attn_prefill.causal_factor == 1.0


def _point(nbytes: float, t: float, ranks: int = 2) -> ReferencePoint:
    return ReferencePoint("network/x/all_reduce.csv", "x", "a100_80gb", ranks, "all_reduce (intra)", "allreduce",
                          "bf16", f"bytes={int(nbytes)},ranks={ranks},per_node=8", 0.0, float(nbytes), t, "intra")


def test_segment_fit_takes_the_median_mode_of_bimodal_small_messages():
    """Two modes, 20 us (7 rows) and 60 us (4 rows), flat in size: the L1 fit's floor sits on the 20 us mode
    (MAPE 36%); a squared-relative-error floor would sit below it (between the modes weighted by 1/t^2)."""
    rows = [_point(2048 * (i + 1), 20e-6 if i % 3 else 60e-6) for i in range(11)]
    floor, _ = nccl_fit._segment(rows, 2, 3e11)
    assert floor == pytest.approx(20e-6, rel=0.05)


def _vidur_network(root: Path) -> Path:
    """A Vidur-format network table: 3 iterations per size (min / median / max), sizes 2 KiB to 40 MiB."""
    rows = []
    for i in range(60):
        size = 2048 * 1.17 ** i
        t = 0.02 + size / 1.5e8  # ms
        rows.append({"rank": 0, "num_workers": 2, "size": int(size), "collective": "all_reduce",
                     "devices_per_node": 8, "max_devices_per_node": 8, "time_stats.all_reduce.min": t * 0.9,
                     "time_stats.all_reduce.median": t, "time_stats.all_reduce.max": t * 1.3,
                     "time_stats.all_reduce.mean": t * 3.2 / 3, "time_stats.all_reduce.std": 0.0})
    path = root / "network" / "a100_dgx" / "all_reduce.csv"
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return root


def test_band_table_measures_the_repeat_noise_floor_and_covers_every_size(tmp_path):
    lines = allreduce_bands.vidur_bands(str(_vidur_network(tmp_path)))
    assert [r["band"] for r in lines] == list(range(1, allreduce_bands.BANDS + 1))
    assert all(r["group"] == "a100_80gb intra p=2" for r in lines)
    # (|0.9 - 1| + |1.3 - 1|) / 3 = 13.3% in every band; the law is one segment, so the model is near exact
    assert all(r["noise_rep"] == pytest.approx(40 / 3, rel=1e-6) for r in lines)
    assert all(r["model_med"] < 2.0 for r in lines)
    assert all(r["monotone"] == 0.0 for r in lines)   # the law rises with size: a non-decreasing f fits it exactly
    assert lines[0]["lo"] < lines[-1]["hi"]
    md = allreduce_bands.bands_md(lines)
    assert md.count("\n") == len(lines) + 1 and "| a100_80gb intra p=2 | 10 |" in md


def test_custom_bands_one_per_held_out_size():
    lines = allreduce_bands.custom_bands({4: [(16384.0, 4.0e-6, 5.0e-6), (2048.0, 4.8e-6, 4.8e-6)]})
    assert [(r["lo"], round(r["model_med"], 6)) for r in lines] == [(2048.0, 0.0), (16384.0, 20.0)]


def test_monotone_floor_is_the_best_non_decreasing_fit():
    """PR 2904 TP4 reads 4.8, 3.7, 4.8 us at 2, 16, 128 KiB: the best non-decreasing f takes 3.7 for the first two
    (|3.7 / 4.8 - 1| = 22.9% on one row of three); 4.8 for both would cost |4.8 / 3.7 - 1| = 29.7%."""
    assert allreduce_bands.monotone_floor([4.8, 3.7, 4.8]) == pytest.approx(100 * (1.1 / 4.8) / 3)
    assert allreduce_bands.monotone_floor([1.0, 2.0, 2.0, 5.0]) == 0.0
    # bimodal 20 / 60 us in runs: no non-decreasing f follows the drop back to 20
    assert allreduce_bands.monotone_floor([20, 20, 60, 60, 20, 20]) > 20.0
