"""Per-family error table: the grid form's cross-validated error beside the analytical model's on the same rows.

`family_errors(columns, peaks, hardware)` -> one line per family (NCCL per collective, GEMM also per format): rows,
median and p90 |error| (%) of the grid form on held-out rows (`crossval`, 5-fold by shape), the median for whole
models held out (`crossval.MODEL_KEYS`: attention heads / KV heads / head dim, MoE dimensions), and with an `analytical` pricing function the analytical model's on every row. `markdown(lines)` renders them.
"""
from __future__ import annotations

import numpy as np

from calibrate.aic.crossval import cross_validate
from calibrate.aic.grid import FAMILIES, Peaks

TARGET_PCT = {"gemm": 5.0, "attn_prefill": 5.0, "attn_decode": 5.0, "moe": 5.0, "custom_allreduce": 10.0,
              "nccl": 10.0, "mla_prefill": 5.0, "mla_decode": 5.0, "deepep_normal": 10.0, "deepep_ll": 10.0,
              "mla_bmm": 5.0, "gdn_prefill": 10.0, "gdn_decode": 10.0, "dsa_prefill": 10.0, "dsa_decode": 10.0}
BY_COMBO = ("attn_prefill", "attn_decode", "moe")


def _stats(err: np.ndarray) -> tuple[float, float]:
    a = np.abs(err[np.isfinite(err)]) * 100.0
    if not len(a):
        return float("nan"), float("nan")
    return float(np.median(a)), float(np.percentile(a, 90))


def family_errors(columns: dict[str, np.ndarray], peaks: Peaks, hardware: str, analytical=None,
                  by_combo: bool = True) -> list[dict]:
    """Report lines (dicts) for every family in `columns`; `analytical(family, cols, hardware)` -> seconds per row
    (the simulator's analytical pricing, `sim/validate/op_analytical.py`) adds its error beside the grid's."""
    lines = []
    fam = np.asarray(columns["family"])
    for family in FAMILIES:
        rows = np.flatnonzero(fam == family)
        if not len(rows):
            continue
        cols = {k: v[rows] for k, v in columns.items()}
        cv = cross_validate(family, cols, peaks)
        combo = cross_validate(family, cols, peaks, by_combo=True) if by_combo and family in BY_COMBO else None
        ana = None
        if analytical is not None:
            ana = analytical(family, cols, hardware) / np.asarray(cols["latency_s"], dtype=np.float64) - 1.0
        if family == "nccl":
            parts = [(f"nccl {op}", cols["op"] == op) for op in sorted(set(cols["op"].tolist()))]
        elif family in ("deepep_normal", "deepep_ll", "mla_bmm", "gdn_prefill", "gdn_decode"):
            parts = [(f"{family} {op.replace('deepep_', '').replace('mla_bmm_', '').replace('gdn_', '')}",
                      cols["op"] == op)
                     for op in sorted(set(cols["op"].tolist()))]
        elif family == "custom_allreduce":
            parts = [(f"custom_allreduce {v}", cols["variant"] == v) for v in sorted(set(cols["variant"].tolist()))]
        elif family == "gemm":
            parts = [("gemm", np.ones(len(rows), dtype=bool))]
            parts += [(f"gemm {d}", cols["dtype"] == d) for d in sorted(set(cols["dtype"].tolist()))]
        else:
            parts = [(family, np.ones(len(rows), dtype=bool))]
        for name, mask in parts:
            line = {"family": family, "name": name, "rows": int(mask.sum()), "target_pct": TARGET_PCT[family]}
            line["cv_median_pct"], line["cv_p90_pct"] = _stats(cv[mask])
            if combo is not None:
                line["combo_median_pct"], line["combo_p90_pct"] = _stats(combo[mask])
            if ana is not None:
                line["analytical_median_pct"], line["analytical_p90_pct"] = _stats(ana[mask])
            lines.append(line)
    return lines


def _f(x: float | None) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.1f}"


def markdown(report: list[tuple[str, str, list[dict]]]) -> str:
    """A markdown table of (hardware, engine, lines) groups."""
    out = ["| GPU | engine | family | rows | CV median % | CV p90 % | unseen model median % | analytical median % | "
           "analytical p90 % |", "|---|---|---|---|---|---|---|---|---|"]
    for hardware, engine, lines in report:
        for ln in lines:
            out.append(f"| {hardware} | {engine} | {ln['name']} | {ln['rows']} | {_f(ln['cv_median_pct'])} | "
                       f"{_f(ln['cv_p90_pct'])} | {_f(ln.get('combo_median_pct'))} | "
                       f"{_f(ln.get('analytical_median_pct'))} | {_f(ln.get('analytical_p90_pct'))} |")
    return "\n".join(out)
