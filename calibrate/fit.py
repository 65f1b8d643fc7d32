"""Fits `time = launch_s + roofline_s / efficiency(roofline_s)` per (op, dtype), with held-out error.

Why this form: a kernel's time is bounded below by its roofline (compute or memory, whichever is larger) and by a
fixed launch/setup cost; between the two, how close it gets depends mostly on its size (small ops cannot fill the
machine: partial waves, short K loops, split-KV overheads). So efficiency is a smooth function of size, and the
roofline time is a size measure that works across shapes and formats. Efficiency is piecewise-linear in
log(roofline_s) between knots placed at quantiles of the training points and clamped outside them; this is exactly
the curve `calibrate.profile.EfficiencyCurve` evaluates, so the reported error is the error of the shipped curve.

Fitting minimises the squared log ratio of predicted to measured time (relative error, symmetric in over- and
under-prediction) with Levenberg-Marquardt on launch = exp(a) >= 0 and efficiency = 2 * sigmoid(b) in (0, 2),
started from a linear least-squares solution in 1/efficiency. Pure numpy, deterministic.

Held-out split: within each (op, dtype), distinct shapes sorted by roofline time; every `every`-th shape (offset
every // 2, never the smallest or largest, so the test is interpolation, which is how the simulator reads a
profile) is withheld from every fit of that (op, dtype). Errors are reported on those shapes only.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from calibrate.profile import EfficiencyCurve

MAX_KNOTS = 8
POINTS_PER_KNOT = 4
EFF_MIN, EFF_MAX = 1e-4, 1.999
B_LIMIT = 12.0  # |logit| bound of the efficiency parameters: efficiency stays in [1.2e-5, 2)


@dataclass(frozen=True)
class CurveFit:
    """A fitted curve and its errors (percent). `held_out_*` are None when no shape was withheld."""

    curve: EfficiencyCurve
    n_train: int
    n_held_out: int
    train_mape_pct: float
    held_out_mape_pct: float | None
    held_out_max_abs_pct: float | None

    def summary(self) -> dict:
        return {"launch_s": self.curve.launch_s, "knots_roofline_s": list(self.curve.roofline_s),
                "knots_efficiency": list(self.curve.efficiency), "n_train": self.n_train,
                "n_held_out": self.n_held_out, "train_mape_pct": self.train_mape_pct,
                "held_out_mape_pct": self.held_out_mape_pct, "held_out_max_abs_pct": self.held_out_max_abs_pct}


def _weights(x: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """[n, K] linear-interpolation weights of x over knots (both log roofline), clamped outside (as log_interp)."""
    n, k = len(x), len(knots)
    w = np.zeros((n, k))
    if k == 1:
        w[:, 0] = 1.0
        return w
    xc = np.clip(x, knots[0], knots[-1])
    hi = np.clip(np.searchsorted(knots, xc, side="right"), 1, k - 1)
    lo = hi - 1
    frac = (xc - knots[lo]) / (knots[hi] - knots[lo])
    w[np.arange(n), lo] = 1.0 - frac
    w[np.arange(n), hi] += frac
    return w


def _knots(x: np.ndarray) -> np.ndarray:
    count = int(np.clip(len(x) // POINTS_PER_KNOT, 1, MAX_KNOTS))
    if count == 1:
        return np.array([float(np.median(x))])
    return np.unique(np.quantile(x, np.linspace(0.0, 1.0, count)))


def _predict(theta: np.ndarray, r: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    launch = math.exp(theta[0])
    eff = 2.0 / (1.0 + np.exp(-np.clip(theta[1:], -B_LIMIT, B_LIMIT)))
    return launch + r / (w @ eff), launch, eff


def fit_curve(roofline_s: np.ndarray, measured_s: np.ndarray) -> EfficiencyCurve:
    """Least-relative-squares fit of launch + roofline / efficiency(roofline) to the points."""
    r, t = np.asarray(roofline_s, float), np.asarray(measured_s, float)
    if len(r) == 0:
        raise ValueError("no points to fit")
    x = np.log(r)
    knots = _knots(x)
    w = _weights(x, knots)
    if len(r) < 3:  # too few points for a launch term: constant efficiency through the median ratio
        eff = float(np.clip(np.median(r / t), EFF_MIN, EFF_MAX))
        return EfficiencyCurve(tuple(float(v) for v in np.exp(knots)), (eff,) * len(knots), 0.0)
    # Linear start: t = L + r * (w @ g), g = 1/efficiency, rows scaled by 1/t (relative error).
    a_mat = np.hstack([np.ones((len(r), 1)), r[:, None] * w]) / t[:, None]
    sol = np.linalg.lstsq(a_mat, np.ones(len(r)), rcond=None)[0]
    launch0 = max(sol[0], 1e-9 * float(t.min()) + 1e-12)
    eff0 = np.clip(1.0 / np.clip(sol[1:], 1.0 / EFF_MAX, 1.0 / EFF_MIN), EFF_MIN, EFF_MAX)
    theta = np.concatenate([[math.log(launch0)], np.log(eff0 / (2.0 - eff0))])
    theta = _levenberg_marquardt(theta, r, t, w)
    _, launch, eff = _predict(theta, r, w)
    eff = np.clip(eff, EFF_MIN, EFF_MAX)
    return EfficiencyCurve(tuple(float(v) for v in np.exp(knots)), tuple(float(v) for v in eff), float(launch))


def _levenberg_marquardt(theta: np.ndarray, r: np.ndarray, t: np.ndarray, w: np.ndarray,
                         iterations: int = 200) -> np.ndarray:
    """Minimise sum(log(predicted / measured)^2): the relative error, symmetric in over- and under-prediction
    (a squared (predicted - measured) / measured would favour under-predicting scattered points)."""
    log_t = np.log(t)

    def residuals(th: np.ndarray) -> np.ndarray:
        return np.log(_predict(th, r, w)[0]) - log_t

    res = residuals(theta)
    cost, lam = float(res @ res), 1e-3
    for _ in range(iterations):
        pred, launch, eff = _predict(theta, r, w)
        denom = w @ eff
        jac = np.empty((len(r), len(theta)))
        jac[:, 0] = launch / pred
        jac[:, 1:] = -(r / denom ** 2 / pred)[:, None] * w * (eff * (1.0 - eff / 2.0))[None, :]
        jtj, grad = jac.T @ jac, jac.T @ res
        try:
            step = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj) + 1e-12), -grad)
        except np.linalg.LinAlgError:  # collinear points leave jtj singular once the damping has shrunk
            lam *= 4.0
            if lam > 1e10:
                break
            continue
        trial = theta + step
        trial[0] = min(trial[0], math.log(float(t.max())))  # launch cannot exceed the slowest measurement
        trial[1:] = np.clip(trial[1:], -B_LIMIT, B_LIMIT)
        new_res = residuals(trial)
        new_cost = float(new_res @ new_res)
        if new_cost < cost:
            done = cost - new_cost < 1e-12 * max(cost, 1e-30)
            theta, res, cost, lam = trial, new_res, new_cost, lam / 3.0
            if done:
                break
        else:
            lam *= 4.0
            if lam > 1e10:
                break
    return theta


def relative_errors_pct(curve: EfficiencyCurve, roofline_s: list[float], measured_s: list[float]) -> list[float]:
    """Signed (predicted - measured) / measured in percent, predicted by the shipped curve's own evaluation."""
    return [100.0 * (curve.time_s(r) - t) / t for r, t in zip(roofline_s, measured_s)]


def held_out_shapes(rows: list[dict], every: int) -> set[tuple[str, str, str]]:
    """(op, dtype, shape) withheld from fitting: every `every`-th distinct shape by roofline, ends excluded."""
    by_group: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for row in rows:
        by_group[(row["op"], row["dtype"])][row["shape"]] = row["roofline_s"]
    held = set()
    if every < 2:
        return held
    for (op, dtype), shapes in by_group.items():
        ordered = sorted(shapes, key=lambda s: (shapes[s], s))
        for i, shape in enumerate(ordered):
            if 0 < i < len(ordered) - 1 and i % every == every // 2:
                held.add((op, dtype, shape))
    return held


def fit_rows(rows: list[dict], held: set[tuple[str, str, str]]) -> CurveFit | None:
    """Fit on the rows whose shape is not in `held`; report errors on the rows whose shape is."""
    train = [r for r in rows if (r["op"], r["dtype"], r["shape"]) not in held]
    test = [r for r in rows if (r["op"], r["dtype"], r["shape"]) in held]
    if not train:
        return None
    curve = fit_curve(np.array([r["roofline_s"] for r in train]), np.array([r["measured_s"] for r in train]))
    train_err = relative_errors_pct(curve, [r["roofline_s"] for r in train], [r["measured_s"] for r in train])
    test_err = relative_errors_pct(curve, [r["roofline_s"] for r in test], [r["measured_s"] for r in test])
    return CurveFit(curve, len(train), len(test), float(np.mean(np.abs(train_err))),
                    float(np.mean(np.abs(test_err))) if test_err else None,
                    float(np.max(np.abs(test_err))) if test_err else None)


def profile_rows(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """The series a profile stands for, per (op, dtype): at each shape the primary implementation's row, or, where
    the primary did not run, the fastest baseline's."""
    best: dict[tuple[str, str, str], dict] = {}
    for row in rows:
        key = (row["op"], row["dtype"], row["shape"])
        cur = best.get(key)
        rank = (not row["primary"], row["measured_s"])
        if cur is None or rank < (not cur["primary"], cur["measured_s"]):
            best[key] = row
    series: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for (op, dtype, _), row in sorted(best.items()):
        series[(op, dtype)].append(row)
    return dict(series)


@dataclass
class FitReport:
    """Per-implementation fits (keys "op/dtype/impl"), the profile's fits (keys (op, dtype)), baseline ratios."""

    by_impl: dict[str, CurveFit]
    profile: dict[tuple[str, str], CurveFit]
    impls_in_profile: dict[tuple[str, str], dict[str, int]]
    ratio_to_primary: dict[str, float]
    holdout_every: int


def fit_measurements(rows: list[dict], holdout_every: int = 4) -> FitReport:
    """Fit every implementation and every profile series; fills each row's `predicted_s`, `held_out` and
    `in_profile` in place."""
    held = held_out_shapes(rows, holdout_every)
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[f"{row['op']}/{row['dtype']}/{row['impl']}"].append(row)
        row["held_out"] = (row["op"], row["dtype"], row["shape"]) in held
        row["in_profile"] = False
    by_impl = {}
    for name, g in sorted(groups.items()):
        fit = fit_rows(g, held)
        if fit is None:
            continue
        by_impl[name] = fit
        for row in g:
            row["predicted_s"] = fit.curve.time_s(row["roofline_s"])
    profile, used = {}, {}
    for key, series in profile_rows(rows).items():
        fit = fit_rows(series, held)
        if fit is None:
            continue
        profile[key] = fit
        counts: dict[str, int] = defaultdict(int)
        for row in series:
            row["in_profile"] = True
            counts[row["impl"]] += 1
        used[key] = dict(counts)
    return FitReport(by_impl, profile, used, _ratios(rows), holdout_every)


def _ratios(rows: list[dict]) -> dict[str, float]:
    """Median over shared shapes of baseline time / primary time, per baseline group (> 1: ours is faster)."""
    primary = {(r["op"], r["dtype"], r["shape"]): r["measured_s"] for r in rows if r["primary"]}
    ratios: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        p = primary.get((r["op"], r["dtype"], r["shape"]))
        if not r["primary"] and p:
            ratios[f"{r['op']}/{r['dtype']}/{r['impl']}"].append(r["measured_s"] / p)
    return {k: float(np.median(v)) for k, v in sorted(ratios.items())}
