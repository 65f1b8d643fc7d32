"""NCCL all-reduce by message size (`calibrate.efficiency.NcclForm`), fitted to Vidur's A100 network tables.

Vidur's `network/<node>/all_reduce.csv` (MIT, Microsoft; ../shared/reference-profiles/vidur, not shipped) times
torch.distributed (NCCL) all-reduce from 2 KiB up, per rank count and node layout. Small messages carry a floor of
tens of microseconds (launch plus NCCL's synchronisation of the ranks) that the ring formula's 2(p-1) hops of the
datasheet latency misses, and NCCL switches protocol and algorithm (LL / LL128 / Simple, ring / tree) with size, so
each (node, link, ranks) gets up to five size segments `floor + 2 (p-1)/p S / (B e)`, B the conf/hardware link.
Split: rows sorted by size, every third from the second held out (`calibrate.hopper_fit.split`); segments and
their breaks are fitted on the rest only (least absolute relative error per segment, by IRLS; breaks chosen from the training
sizes, a break kept only where it cuts the training error by 10%).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from calibrate.hopper_fit import mape, split
from calibrate.vidur import ReferencePoint, load_reference
from inferplan.specs import load_hardware

MIN_ROWS = 5        # training rows a segment needs
MAX_BREAKS = 4      # up to five regimes (NCCL's LL, LL128, Simple protocols; ring, tree), each kept only if it pays
IRLS_ITERS = 8      # reweightings of the segment fit towards least absolute relative error


def _link_bytes_per_s(hardware: str, link: str) -> float:
    hw = load_hardware(hardware)
    return hw.intra_node_bandwidth_bytes_per_s if link == "intra" else hw.inter_node_bandwidth_bytes_per_s


def _segment(rows: list[ReferencePoint], ranks: int, bw: float) -> tuple[float, float]:
    """(floor_s, bus_eff) minimising sum |pred / t - 1| over `rows` (floor >= 0): least squares in relative error,
    reweighted (IRLS, weights 1 / |residual|) towards the L1 optimum. Small messages are bimodal (neighbouring
    sizes read ~20 or ~60 us); squared relative error pulls a floor below both modes, the L1 fit takes the
    median mode, which is what a MAPE measures."""
    x = np.array([2.0 * (ranks - 1) / ranks * p.bytes / bw for p in rows])
    t = np.array([p.measured_s for p in rows])
    w = np.ones(len(t))
    floor, g = 0.0, 1.0
    for _ in range(IRLS_ITERS):
        floor, g = np.linalg.lstsq(np.stack([w / t, w * x / t], axis=1), w, rcond=None)[0]
        if floor < 0:
            floor, g = 0.0, float(np.sum(w * w * x / t) / np.sum((w * x / t) ** 2))
        w = 1.0 / np.sqrt(np.maximum(np.abs((floor + g * x) / t - 1.0), 1e-3))
    return float(floor), 1.0 / max(float(g), 1e-12)


def predict(segs: list[tuple[float, float, float]], p: ReferencePoint, bw: float) -> float:
    for max_bytes, floor, eff in segs:
        if p.bytes <= max_bytes:
            return floor + 2.0 * (p.tp - 1) / p.tp * p.bytes / (bw * eff)
    raise ValueError("segments must end at inf")


def fit_segments(train: list[ReferencePoint], ranks: int, bw: float) -> list[tuple[float, float, float]]:
    """Greedy breaks over the training sizes: [(max_bytes, floor_s, bus_eff), ...] ending at inf."""
    sizes = sorted({p.bytes for p in train})
    cands = sizes[2 * MIN_ROWS:-2 * MIN_ROWS:MIN_ROWS]

    def segs_for(breaks: list[float]):
        edges = [0.0, *breaks, float("inf")]
        out = []
        for lo, hi in zip(edges[:-1], edges[1:]):
            rows = [p for p in train if lo < p.bytes <= hi]
            if len(rows) < MIN_ROWS:
                return None
            out.append((hi, *_segment(rows, ranks, bw)))
        return out

    def err(segs) -> float:
        return sum(abs(predict(segs, p, bw) / p.measured_s - 1.0) for p in train)

    breaks: list[float] = []
    best = segs_for(breaks)
    assert best is not None
    for _ in range(MAX_BREAKS):
        trials = [(err(s), b, s) for b in cands if b not in breaks for s in [segs_for(sorted([*breaks, b]))] if s]
        if not trials:
            break
        e, b, s = min(trials, key=lambda r: (r[0], r[1]))
        if e > 0.9 * err(best):
            break
        breaks, best = sorted([*breaks, b]), s
    return best


def fit(folder: str) -> tuple[dict, list[dict]]:
    """(the `nccl_allreduce` block for ampere.yaml, report lines per node/link/ranks on the held-out rows)."""
    points, _ = load_reference(folder)
    groups: dict[tuple[str, str, int], list[ReferencePoint]] = defaultdict(list)
    for p in points:
        if p.op == "allreduce":
            groups[(p.hardware, p.link, p.tp)].append(p)
    segments: dict = {}
    lines = []
    for (hw, link, ranks), rows in sorted(groups.items()):
        bw = _link_bytes_per_s(hw, link)
        tr, ho = split(rows, lambda p: p.bytes, fold=1)
        train, held = [rows[i] for i in tr], [rows[i] for i in ho]
        segs = fit_segments(train, ranks, bw)
        segments.setdefault(hw, {}).setdefault(link, {})[ranks] = [
            {"max_bytes": float(m), "floor_s": float(f"{f:.6g}"), "bus_eff": float(f"{e:.6g}")} for m, f, e in segs]
        pred = [predict(segs, p, bw) for p in held]
        meas = [p.measured_s for p in held]
        sizes = np.array([p.bytes for p in held])
        edges = np.quantile(sizes, np.linspace(0, 1, 11))
        dec = [mape([x for x, s in zip(pred, sizes) if lo <= s <= hi], [m for m, s in zip(meas, sizes) if lo <= s <= hi])
               for lo, hi in zip(edges[:-1], edges[1:])]
        lines.append({"hardware": hw, "link": link, "ranks": ranks, "n": len(held), "train": len(train),
                      "after": mape(pred, meas), "worst_decile": float(max(dec)), "smallest_decile": float(dec[0]),
                      "source": sorted({p.source for p in rows})[0]})
    basis = ("fit: vidur network/*/all_reduce.csv (median times), rows by size with every third from the second "
             "held out; segments `floor_s + 2 (p-1)/p bytes / (link bandwidth of conf/hardware x bus_eff)` up to "
             "max_bytes (python -m calibrate.nccl_fit)")
    return {"basis": basis, "segments": segments}, lines


def held_out_ids(points: list[ReferencePoint]) -> set[int]:
    """id() of the all-reduce points `fit` held out (for reports that must count only those)."""
    groups: dict[tuple[str, str, int], list[ReferencePoint]] = defaultdict(list)
    for p in points:
        if p.op == "allreduce":
            groups[(p.hardware, p.link, p.tp)].append(p)
    out: set[int] = set()
    for rows in groups.values():
        out |= {id(rows[i]) for i in split(rows, lambda p: p.bytes, fold=1)[1]}
    return out


if __name__ == "__main__":
    import sys

    _, report = fit(sys.argv[1] if len(sys.argv) > 1 else "../shared/reference-profiles/vidur")
    for r in report:
        print(f"{r['hardware']:<10} {r['link']:<5} p={r['ranks']:<3} held out {r['n']:>4} (fit {r['train']})  "
              f"MAPE {r['after']:5.1f}%  smallest-size decile {r['smallest_decile']:5.1f}%  worst decile "
              f"{r['worst_decile']:5.1f}%")
