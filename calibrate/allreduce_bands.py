"""`python -m calibrate.allreduce_bands [<Vidur folder>]`: all-reduce error by message size, against the data's noise.

"At every message size" is checked here, not asserted: per all-reduce group (Vidur's network tables per node,
link and rank count; SGLang PR 2904's custom all-reduce per TP degree) the held-out rows, sorted by size, are cut
into ten bands of equal count (smallest tenth, ..., largest; PR 2904 has a handful of held-out sizes: one band
each). Per band:

* `noise rep`: the noise floor from repeats. A Vidur row is the min / median / max of 3 timed iterations of one
  size (its mean is their mean), so the best constant predictor of that size is the median, and the noise floor
  is the MAPE of the 3 iterations against it: (|min - med| + |max - med|) / (3 med).
* `noise nbr`: the floor from neighbouring sizes: each row's median against the median of it and its 2
  neighbours on either side in size (5 sizes a few % apart, where the true time barely changes); a smooth
  function of size cannot beat it where neighbouring sizes scatter.
* `monotone`: the least MAPE of any non-decreasing function of size fitted to the band's held-out medians
  themselves (exact; an oracle that sees the answers, so a lower bound for every size-monotone form, not a model).
* `model/med`: the model (`calibrate.nccl_fit`'s segments) against each size's median (what the report's
  whole-group MAPE uses); `model/raw`: against the 3 iterations; `model/nbr`: against the neighbour median
  (like for like with `noise nbr`).
PR 2904 gives one latency per size (no repeats): its noise columns are empty.
"""
from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate import nccl_fit
from calibrate.hopper_fit import split
from calibrate.vidur import NODE_HARDWARE, find_root, load_reference

BANDS = 10
NEIGHBOURS = 2      # sizes on either side in the neighbour median


def _raw_samples(root: Path) -> dict[tuple[str, int, int, int], list[tuple[float, float, float]]]:
    """(node hardware, workers, devices per node, size) -> [(min, median, max) seconds] of every raw row."""
    out: dict = defaultdict(list)
    for path in sorted(root.glob("network/*/all_reduce.csv")):
        hw = NODE_HARDWARE.get(path.parent.name)
        if hw is None:
            continue
        df = pd.read_csv(path)
        for r in df.to_dict("records"):
            out[(hw, int(r["num_workers"]), int(r["devices_per_node"]), int(r["size"]))].append(
                tuple(r[f"time_stats.all_reduce.{k}"] * 1e-3 for k in ("min", "median", "max")))
    return out


def monotone_floor(times: list[float]) -> float:
    """Least mean |f_i / t_i - 1| (percent) over non-decreasing f, `times` in size order: dynamic programming over
    the values an optimum takes (the times themselves; the loss is piecewise linear in each f_i)."""
    t = np.asarray(times, float)
    values = np.unique(t)
    best = np.zeros(len(values))            # best[v]: least loss of the rows so far with the last f at values[v]
    for ti in t:
        best = np.minimum.accumulate(best) + np.abs(values / ti - 1.0)
    return float(best.min() / len(t) * 100.0)


def _pct(xs: list[float]) -> float:
    return float(np.mean(xs) * 100.0) if xs else float("nan")


def vidur_bands(folder: str) -> list[dict]:
    """One line per (group, band): sizes, rows, noise floors and model errors (percent)."""
    root = find_root(folder)
    raw = _raw_samples(root)
    points, _ = load_reference(folder)
    groups: dict[tuple[str, str, int], list] = defaultdict(list)
    for p in points:
        if p.op == "allreduce":
            groups[(p.hardware, p.link, p.tp)].append(p)
    lines = []
    for (hw, link, ranks), rows in sorted(groups.items()):
        bw = nccl_fit._link_bytes_per_s(hw, link)
        tr, ho = split(rows, lambda p: p.bytes, fold=1)
        segs = nccl_fit.fit_segments([rows[i] for i in tr], ranks, bw)
        ordered = sorted(rows, key=lambda p: p.bytes)
        pos = {id(p): j for j, p in enumerate(ordered)}
        held = sorted((rows[i] for i in ho), key=lambda p: p.bytes)
        for b in range(BANDS):
            band = held[b * len(held) // BANDS:(b + 1) * len(held) // BANDS]
            rep, nbr, med, rawe, mnbr = [], [], [], [], []
            for p in band:
                per_node = int(dict(kv.split("=") for kv in p.shape.split(","))["per_node"])
                samples = raw[(hw, ranks, per_node, int(p.bytes))]
                pred = nccl_fit.predict(segs, p, bw)
                for lo, m, hi in samples:
                    rep.append((abs(lo - m) + abs(hi - m)) / (3 * m))
                    rawe += [abs(pred / x - 1) for x in (lo, m, hi)]
                j = pos[id(p)]
                window = [q.measured_s for q in ordered[max(0, j - NEIGHBOURS):j + NEIGHBOURS + 1]]
                wm = float(np.median(window))
                nbr.append(abs(p.measured_s / wm - 1))
                med.append(abs(pred / p.measured_s - 1))
                mnbr.append(abs(pred / wm - 1))
            lines.append({"group": f"{hw} {link} p={ranks}", "band": b + 1, "lo": band[0].bytes, "hi": band[-1].bytes,
                          "n": len(band), "noise_rep": _pct(rep), "noise_nbr": _pct(nbr),
                          "monotone": monotone_floor([p.measured_s for p in band]), "model_med": _pct(med),
                          "model_raw": _pct(rawe), "model_nbr": _pct(mnbr)})
    return lines


def custom_bands(kfold_rows: dict[int, list[tuple[float, float, float]]]) -> list[dict]:
    """PR 2904 per TP degree: one band per held-out size, from (bytes, predicted, measured) of the 3-fold fits."""
    lines = []
    for p, rows in sorted(kfold_rows.items()):
        for b, (nbytes, pred, meas) in enumerate(sorted(rows)):
            lines.append({"group": f"h100 custom TP{p}", "band": b + 1, "lo": nbytes, "hi": nbytes, "n": 1,
                          "noise_rep": float("nan"), "noise_nbr": float("nan"), "monotone": float("nan"),
                          "model_med": abs(pred / meas - 1) * 100, "model_raw": abs(pred / meas - 1) * 100,
                          "model_nbr": float("nan")})
    return lines


def _size(b: float) -> str:
    for unit, k in (("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if b >= k:
            return f"{b / k:.3g} {unit}"
    return f"{b:.0f} B"


def _cell(x: float) -> str:
    return "" if math.isnan(x) else f"{x:.1f}"


def bands_md(lines: list[dict]) -> str:
    out = ["| group | band (size tenth) | sizes | held out | noise rep | noise nbr | monotone | model/med | model/raw "
           "| model/nbr |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in lines:
        out.append(f"| {r['group']} | {r['band']} | {_size(r['lo'])}-{_size(r['hi'])} | {r['n']} | "
                   f"{_cell(r['noise_rep'])} | {_cell(r['noise_nbr'])} | {_cell(r['monotone'])} | "
                   f"{_cell(r['model_med'])} | {_cell(r['model_raw'])} | {_cell(r['model_nbr'])} |")
    return "\n".join(out)


if __name__ == "__main__":
    print(bands_md(vidur_bands(sys.argv[1] if len(sys.argv) > 1 else "../shared/reference-profiles/vidur")))
