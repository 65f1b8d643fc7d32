"""Cross-validated error of the grid form: fit on part of a family's table, error on the rows held out.

Rows are split into `folds` (5) by shape: a seeded permutation of the family's rows in file order (so the same
table gives the same folds), fold i = rows at permutation positions i, i + 5, ... Each fold is predicted by a
`FamilyGrid` built from the other folds' rows only; every row is held out once. Errors are predicted / measured
- 1 per held-out row. `by_combo=True` holds out whole models instead (`MODEL_KEYS`: an attention shape of heads,
KV heads and head dim, or an MoE layer's hidden, intermediate, top-k and experts, never measured): the error of
pricing a model the table does not hold, from its neighbours.
"""
from __future__ import annotations

import numpy as np

from calibrate.aic.grid import FAMILIES, FamilyGrid, Peaks, gemm_variant

SEED = 20261203
MODEL_KEYS = {"attn_prefill": ("heads", "kv_heads", "head_dim"), "attn_decode": ("heads", "kv_heads", "head_dim"),
              "moe": ("hidden", "inter", "topk", "experts")}


def predict(grid: FamilyGrid, cols: dict[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
    """The grid's latency (s) at each of `rows` (indices into `cols`), grouped by exact-match key and combo."""
    spec = grid.spec
    out = np.full(len(rows), np.nan)
    keys = [tuple(cols[c][i] for c in spec.cat) + tuple(float(cols[c][i]) for c in spec.combo) for i in rows]
    groups: dict[tuple, list[int]] = {}
    for j, key in enumerate(keys):
        groups.setdefault(key, []).append(j)
    nc = len(spec.cat)
    for key, js in groups.items():
        r = rows[np.asarray(js)]
        dense = tuple(np.asarray(cols[c], dtype=np.float64)[r] for c in spec.dense)
        out[np.asarray(js)] = grid.latency_s(tuple(key[:nc]), tuple(key[nc:]), dense)
    return out


def folds_of(n: int, folds: int = 5, seed: int = SEED) -> np.ndarray:
    """Fold number of each of n rows."""
    fold = np.empty(n, dtype=np.intp)
    fold[np.random.default_rng(seed).permutation(n)] = np.arange(n) % folds
    return fold


def cross_validate(family: str, cols: dict[str, np.ndarray], peaks: Peaks, folds: int = 5,
                   by_combo: bool = False) -> np.ndarray:
    """Relative error (predicted / measured - 1) of every row of `cols` (one family's grid columns), each predicted
    by a grid fitted without its fold."""
    n = len(cols["latency_s"])
    spec = FAMILIES[family]
    if by_combo:
        if family not in MODEL_KEYS:
            raise ValueError(f"{family} has no model dimensions to hold out")
        combos = [tuple(cols[c][i] for c in spec.cat) + tuple(float(cols[c][i]) for c in MODEL_KEYS[family])
                  for i in range(n)]
        uniq = sorted(set(combos))
        combo_fold = dict(zip(uniq, folds_of(len(uniq), folds)))
        fold = np.array([combo_fold[c] for c in combos], dtype=np.intp)
    else:
        fold = folds_of(n, folds)
    pred = np.full(n, np.nan)
    for i in range(folds):
        test, train = np.flatnonzero(fold == i), np.flatnonzero(fold != i)
        if not len(test) or not len(train):
            continue
        grid = FamilyGrid(family, {k: v[train] for k, v in cols.items()}, peaks)
        keep = [j for j, r in enumerate(test) if tuple(cols[c][r] for c in spec.cat) in grid.groups]
        if keep:
            t = test[np.asarray(keep)]
            pred[t] = predict(grid, cols, t)
    return pred / np.asarray(cols["latency_s"], dtype=np.float64) - 1.0


def split_gemm_by_alignment(columns: dict[str, np.ndarray], peaks: Peaks) -> tuple[dict[str, np.ndarray], dict]:
    """Per GEMM format, whether splitting its rows by M alignment (`grid.gemm_variant`) predicts held-out rows
    better: 5-fold median |error| of both forms; the rows of formats where the split wins get their variant.
    Returns (columns with GEMM `variant` set, {format: {"split", "cv_median_pct_mixed", "cv_median_pct_split"}})."""
    cols = {k: v.copy() for k, v in columns.items()}
    gemm = np.asarray(cols["family"]) == "gemm"
    decisions = {}
    for dtype in sorted(set(np.asarray(cols["dtype"])[gemm].tolist())):
        rows = np.flatnonzero(gemm & (np.asarray(cols["dtype"]) == dtype))
        sub = {k: v[rows] for k, v in cols.items()}
        sub["variant"] = np.full(len(rows), "", dtype=object)
        mixed = float(np.nanmedian(np.abs(cross_validate("gemm", sub, peaks)))) * 100.0
        sub["variant"] = np.asarray(gemm_variant(sub["m"]), dtype=object)
        split = float(np.nanmedian(np.abs(cross_validate("gemm", sub, peaks)))) * 100.0
        decisions[dtype] = {"split": split < mixed, "cv_median_pct_mixed": round(mixed, 3),
                            "cv_median_pct_split": round(split, 3)}
        cols["variant"][rows] = sub["variant"] if split < mixed else ""
    return cols, decisions
