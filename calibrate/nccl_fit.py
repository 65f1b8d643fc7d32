"""NCCL all-reduce by message size (`calibrate.efficiency.NcclForm`), fitted to Vidur's A100 network tables.

Vidur's `network/<node>/all_reduce.csv` (MIT, Microsoft; ../shared/reference-profiles/vidur, not shipped) times
torch.distributed (NCCL) all-reduce from 2 KiB up, per rank count and node layout. Small messages carry a floor of
tens of microseconds (launch plus NCCL's synchronisation of the ranks) that the ring formula's 2(p-1) hops of the
datasheet latency misses, and NCCL switches protocol and algorithm (LL / LL128 / Simple, ring / tree) with size, so
each (node, link, ranks) gets size segments `floor + 2 (p-1)/p S / (B e)`, B the conf/hardware link.
Split: rows sorted by size, every third from the second held out (`calibrate.hopper_fit.split`); segments and
their breaks are fitted on the rest only. Per segment: least absolute relative error, by IRLS. Breaks: for each
count of segments (1 to MAX_SEGMENTS), the least training error over breaks on a grid of the training sizes, by
dynamic programming (a regime bounded on both sides, such as a100_80gb inter TP16's 16-19.75 MiB at twice the
time of its neighbours, needs two breaks at once, which adding one break at a time never pays for), each break
then moved to its best training size nearby. The count: the least inner 3-fold cross-validated error on the
training rows (`choose_count`); the held-out rows play no part.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from calibrate.hopper_fit import mape, split
from calibrate.vidur import ReferencePoint, load_reference
from inferplan.specs import load_hardware

MIN_ROWS = 5        # training rows a segment needs
MAX_SEGMENTS = 16   # candidates up to this many regimes; inner cross-validation picks how many (`choose_count`)
CV_TOL = 0.03       # the fewest segments whose cross-validated error is within this share of the least
INNER_FOLDS = 3     # the training rows, by size, every third in turn: the inner folds that choose the count
IRLS_ITERS = 8      # reweightings of the segment fit towards least absolute relative error
GRID_POINTS = 100   # allowed break positions the exact search runs over (then refined over all sizes)
REFINE_PASSES = 3   # passes moving each break to its best position between its neighbours


def _link_bytes_per_s(hardware: str, link: str) -> float:
    hw = load_hardware(hardware)
    return hw.intra_node_bandwidth_bytes_per_s if link == "intra" else hw.inter_node_bandwidth_bytes_per_s


def _fit_many(x: np.ndarray, t: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One IRLS segment fit per row of `masks` [C, M] over the rows x [M] (bus bytes / link bandwidth, s) and
    t [M] (measured s): (floor_s [C], g [C] = 1 / bus_eff, sum |pred / t - 1| over the masked rows [C]).
    Least squares in relative error, reweighted (weights 1 / sqrt|residual|) towards the L1 optimum; floor >= 0."""
    w = masks.astype(float)
    floor = np.zeros(len(masks))
    g = np.ones(len(masks))
    for _ in range(IRLS_ITERS):
        a, b = w / t, w * x / t          # [C, M]: the design columns (floor, slope), target w
        s11, s12, s22 = (a * a).sum(1), (a * b).sum(1), (b * b).sum(1)
        r1, r2 = (a * w).sum(1), (b * w).sum(1)
        det = s11 * s22 - s12 * s12
        ok = np.abs(det) > 1e-12 * np.maximum(s11 * s22, 1e-300)
        safe = np.where(ok, det, 1.0)
        floor = np.where(ok, (r1 * s22 - r2 * s12) / safe, 0.0)
        g = np.where(ok, (s11 * r2 - s12 * r1) / safe, r2 / np.maximum(s22, 1e-300))
        neg = floor < 0                  # floor pinned at 0: the slope alone
        floor = np.where(neg, 0.0, floor)
        g = np.where(neg, r2 / np.maximum(s22, 1e-300), g)
        flat = g < 0                     # slope pinned at 0 (a noisy short segment): the floor alone
        g = np.where(flat, 0.0, g)
        floor = np.where(flat, r1 / np.maximum(s11, 1e-300), floor)
        res = np.abs((floor[:, None] + g[:, None] * x) / t - 1.0)
        w = masks / np.sqrt(np.maximum(res, 1e-3))
    cost = (masks * np.abs((floor[:, None] + g[:, None] * x) / t - 1.0)).sum(1)
    return floor, g, cost


def _segment(rows: list[ReferencePoint], ranks: int, bw: float) -> tuple[float, float]:
    """(floor_s, bus_eff) minimising sum |pred / t - 1| over `rows` (floor >= 0), by IRLS. Small messages are
    bimodal (neighbouring sizes read ~20 or ~60 us); squared relative error pulls a floor below both modes, the
    L1 fit takes the median mode, which is what a MAPE measures."""
    x = np.array([2.0 * (ranks - 1) / ranks * p.bytes / bw for p in rows])
    t = np.array([p.measured_s for p in rows])
    floor, g, _ = _fit_many(x, t, np.ones((1, len(t)), bool))
    return float(floor[0]), 1.0 / max(float(g[0]), 1e-12)


def predict(segs: list[tuple[float, float, float]], p: ReferencePoint, bw: float) -> float:
    for max_bytes, floor, eff in segs:
        if p.bytes <= max_bytes:
            return floor + 2.0 * (p.tp - 1) / p.tp * p.bytes / (bw * eff)
    raise ValueError("segments must end at inf")


class _Rows:
    """Training rows sorted by size, as arrays; a segment is a slice [lo, hi) of them, a break the index where
    the next segment starts (never between two rows of the same size)."""

    def __init__(self, rows: list[ReferencePoint], ranks: int, bw: float):
        rows = sorted(rows, key=lambda p: p.bytes)
        self.bytes = np.array([p.bytes for p in rows])
        self.x = 2.0 * (ranks - 1) / ranks * self.bytes / bw
        self.t = np.array([p.measured_s for p in rows])
        self.n = len(rows)
        self.cuts = np.flatnonzero(np.diff(self.bytes) > 0) + 1   # indices where a break may go

    def cost(self, lo: int, hi: int) -> float:
        return float(_fit_many(self.x[lo:hi], self.t[lo:hi], np.ones((1, hi - lo), bool))[2][0])

    def best_break(self, lo: int, hi: int, near: int, radius: int) -> tuple[float, int] | None:
        """(cost of [lo, b) + [b, hi), b) for the best break b within `radius` rows of `near`, or None where no
        such split leaves MIN_ROWS a side."""
        first, last = max(lo + MIN_ROWS, near - radius), min(hi - MIN_ROWS, near + radius)
        bs = self.cuts[(self.cuts >= first) & (self.cuts <= last)]
        if len(bs) == 0:
            return None
        idx = np.arange(lo, hi)
        left = idx[None, :] < bs[:, None]                                   # [C, M]
        x, t = self.x[lo:hi], self.t[lo:hi]
        total = _fit_many(x, t, left)[2] + _fit_many(x, t, ~left)[2]
        j = int(np.argmin(total))
        return float(total[j]), int(bs[j])

    def segments(self, breaks: list[int]) -> list[tuple[float, float, float]]:
        edges = [0, *breaks, self.n]
        out = []
        for k, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
            floor, g, _ = _fit_many(self.x[lo:hi], self.t[lo:hi], np.ones((1, hi - lo), bool))
            top = float("inf") if k == len(edges) - 2 else float(self.bytes[hi - 1])
            out.append((top, float(floor[0]), 1.0 / max(float(g[0]), 1e-12)))
        return out


def _refine(r: _Rows, breaks: list[int], radius: int) -> list[int]:
    """Move each break, in turn, to its best position between its neighbours and within `radius` rows (two grid
    steps: the grid search placed it to within one); repeat while it pays."""
    breaks = list(breaks)
    for _ in range(REFINE_PASSES):
        moved = False
        for i in range(len(breaks)):
            lo = breaks[i - 1] if i else 0
            hi = breaks[i + 1] if i + 1 < len(breaks) else r.n
            best = r.best_break(lo, hi, breaks[i], radius)
            if best is not None and best[1] != breaks[i]:
                now = r.cost(lo, breaks[i]) + r.cost(breaks[i], hi)
                if best[0] < now - 1e-12:
                    breaks[i], moved = best[1], True
        if not moved:
            break
    return breaks


def break_path(r: _Rows, max_segments: int = MAX_SEGMENTS) -> list[list[int]]:
    """Breaks for 1, 2, ... segments: for each count the least training error over breaks on a grid of the
    training sizes (every `step`-th allowed break, at most GRID_POINTS of them; exact, by dynamic programming, so
    a regime bounded on both sides is found where one break at a time would not pay), then every break moved to
    its best place between its neighbours over all training sizes."""
    step = max(1, -(-len(r.cuts) // GRID_POINTS))
    grid = np.array([0, *r.cuts[::step], r.n])
    m = len(grid)
    cost = np.full((m, m), np.inf)                                          # cost[i, j]: segment grid[i]..grid[j]
    for i in range(m - 1):
        ends = np.flatnonzero(grid - grid[i] >= MIN_ROWS)
        if len(ends) == 0:
            continue
        lo = grid[i]
        idx = np.arange(lo, r.n)
        masks = idx[None, :] < grid[ends][:, None]
        cost[i, ends] = _fit_many(r.x[lo:], r.t[lo:], masks)[2]
    best = cost[0].copy()                                                   # best[j]: grid[0]..grid[j], k segments
    back: list[np.ndarray] = []
    path = [[]]
    for _ in range(1, max_segments):
        total = best[:, None] + cost                                        # [i, j]: k segments to i, one more to j
        arg = np.argmin(total, axis=0)
        best = total[arg, np.arange(m)]
        back.append(arg)
        if not np.isfinite(best[-1]):
            break
        breaks, j = [], m - 1
        for a in reversed(back):
            j = int(a[j])
            breaks.append(int(grid[j]))
        path.append(_refine(r, sorted(breaks), 2 * step))
    return path


def choose_count(train: list[ReferencePoint], ranks: int, bw: float, max_segments: int = MAX_SEGMENTS) -> int:
    """How many segments: the count with the least inner cross-validated error. The training rows, sorted by
    size, are cut into INNER_FOLDS folds (every third in turn); each fold is priced by the break path fitted on
    the other training rows, and the errors (sum |pred / t - 1|) add up per count. Ties go to fewer segments."""
    rows = sorted(train, key=lambda p: p.bytes)
    cv = np.zeros(max_segments)
    seen = np.zeros(max_segments, bool)
    for f in range(INNER_FOLDS):
        inner = [p for j, p in enumerate(rows) if j % INNER_FOLDS != f]
        test = [p for j, p in enumerate(rows) if j % INNER_FOLDS == f]
        r = _Rows(inner, ranks, bw)
        path = break_path(r, max_segments)
        for k, breaks in enumerate(path):
            segs = r.segments(breaks)
            cv[k] += sum(abs(predict(segs, p, bw) / p.measured_s - 1.0) for p in test)
        cv[len(path):] = np.inf
        seen[:len(path)] = True
    cv[~seen] = np.inf
    return int(np.flatnonzero(cv <= cv.min() * (1.0 + CV_TOL))[0]) + 1


def fit_segments(train: list[ReferencePoint], ranks: int, bw: float) -> list[tuple[float, float, float]]:
    """[(max_bytes, floor_s, bus_eff), ...] ending at inf, fitted on `train` only: the break path over every
    training size, cut at the count `choose_count` picks by inner cross-validation."""
    r = _Rows(train, ranks, bw)
    k = choose_count(train, ranks, bw)
    path = break_path(r, k)
    return r.segments(path[min(k, len(path)) - 1])


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
             "max_bytes, breaks by exact search, their count by inner cross-validation on the training rows "
             "(python -m calibrate.nccl_fit)")
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
