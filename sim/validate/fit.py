"""Fit the residual parameters (`ResidualParams`) to the training requests of a measured run.

Method: Nelder-Mead over x = [step_overhead_ms, ln scale_gemm, ln scale_attention], with the front-end delay
profiled out. Every evaluation simulates the *whole* log (so each training request sees the same batch dynamics
as in reality: the held-out requests are still there, occupying batches) and the loss reads the training
requests only; the held-out requests never enter the loss. Because a front-end delay shifts the whole
simulation by a constant (instances start idle: TTFT and E2E grow by it, TPOT is unchanged), it is solved
exactly per evaluation by a 1-D search instead of being simulated. NOTE: Nelder-Mead, not Gauss-Newton: the loss carries simulation jitter
(below), which finite-difference Jacobians amplify; in the recovery tests Gauss-Newton variants stalled at 2-4x
the loss Nelder-Mead reached with the same number of simulations.

The loss compares distributions, not request pairs: ln(sim/measured) of the 10th..90th percentiles (step 10)
of TTFT within each prompt-length tercile and of TPOT within each tercile of the mean decode context
(prompt + output/2), TTFT and TPOT weighted equally. The terciles let the overhead (constant), the GEMM scale
(linear in tokens) and the attention scale (growing with context) pull apart. When the replay emulates a client
semaphore (reconstructed send times with max_concurrency), the front-end shift is exact only to first order.
NOTE: a per-request loss looks more informative but is unusable for optimisation: which iteration a request
lands in flips with the smallest parameter change, so per-request TTFTs decorrelate and the loss is flat noise
everywhere except at the exact generating parameters. Percentiles average that out, and they are also the only
comparable quantity when send times were reconstructed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from inferplan.config.run import RunConfig
from sim.validate.measured import MeasuredRun
from sim.validate.replay import OP_FAMILIES, Replay, ResidualParams, replay

QUANTILES = np.arange(10, 100, 10)
BINS = 3  # terciles: of the prompt length (TTFT) and of the mean decode context, prompt + output / 2 (TPOT)
FAMILIES = tuple(OP_FAMILIES)          # the scaled families, in x order after the overhead
SIMPLEX_STEP = np.array([2.0, 0.3, 0.5])  # initial simplex: ms, ln-units, ln-units
LN_SCALE_BOUNDS = (math.log(0.05), math.log(20.0))
NOT_COMPLETED_RESIDUAL = math.log(10.0)  # a training request the simulation did not complete counts as 10x off
# Weak prior pulling each efficiency scale toward its configured value: a factor of 2 costs as much as a 1.6%
# misfit of every percentile. It decides only along directions the log cannot resolve (steady decode trades
# overhead against attention time almost exactly); elsewhere the data outweighs it by orders of magnitude.
PRIOR_WEIGHT = 5e-4
WEAK_EFFECT_PCT = 3.0  # a +25% scale (or +1 ms) moving percentiles less than this is not pinned down


def train_mask(n: int, holdout_fraction: float = 0.3, seed: int = 0) -> np.ndarray:
    """Deterministic split [n] bool: True = training. A seeded permutation holds out round(n * fraction) rows,
    interleaved over the whole run (so both sets span every load level)."""
    if not 0.0 < holdout_fraction < 1.0:
        raise ValueError("holdout_fraction must be in (0, 1)")
    held = np.random.default_rng(seed).permutation(n)[: int(round(n * holdout_fraction))]
    mask = np.ones(n, dtype=bool)
    mask[held] = False
    return mask


@dataclass
class FitResult:
    params: ResidualParams
    initial: ResidualParams
    loss_initial: float
    loss_final: float
    improvements: int  # accepted new best points of the search
    simulations: int
    effect_pct: dict = field(default_factory=dict)
    jitter_pct: float = math.nan
    weakly_identified: list = field(default_factory=list)
    history: list = field(default_factory=list)  # [{"params": ..., "loss": ...}] of accepted steps

    def as_dict(self) -> dict:
        return {"params": self.params.as_dict(), "initial": self.initial.as_dict(),
                "loss_initial": self.loss_initial, "loss_final": self.loss_final, "improvements": self.improvements,
                "simulations": self.simulations, "effect_pct": self.effect_pct,
                "jitter_pct": self.jitter_pct,
                "weakly_identified": self.weakly_identified, "history": self.history}


def _quantile_residuals(sim: np.ndarray, meas: np.ndarray, q: np.ndarray) -> np.ndarray:
    ok = np.isfinite(sim)
    if ok.sum() < 2 or meas.size < 2:
        return np.full(q.size, NOT_COMPLETED_RESIDUAL if meas.size else 0.0)
    r = np.log(np.maximum(np.percentile(sim[ok], q), 1e-12) / np.percentile(meas, q))
    # A simulation that leaves training requests unfinished must not look better for it.
    return r + NOT_COMPLETED_RESIDUAL * (1.0 - ok.mean())


def _tercile_masks(rows: np.ndarray, key: np.ndarray) -> list[np.ndarray]:
    """`rows` split into `BINS` groups by the terciles of `key` over those rows (groups of < 2 dropped)."""
    if not rows.any():
        return []
    edges = np.percentile(key[rows], np.linspace(0, 100, BINS + 1))
    which = np.clip(np.searchsorted(edges[1:-1], key, side="right"), 0, BINS - 1)
    return [m for m in (rows & (which == b) for b in range(BINS)) if m.sum() >= 2]


class _Objective:
    """Residuals of the training requests for a parameter vector; counts simulations."""

    def __init__(self, run: RunConfig, measured: MeasuredRun, train: np.ndarray, client_limit: int | None) -> None:
        self.run, self.m, self.limit = run, measured, client_limit
        self.simulations = 0
        ttft_rows = train & np.isfinite(measured.ttft_s) & (measured.ttft_s > 0)
        tpot_rows = train & np.isfinite(measured.tpot_s) & (measured.tpot_s > 0)
        self.tpot_rows = tpot_rows
        self.ttft_bins = _tercile_masks(ttft_rows, measured.prompt_tokens.astype(np.float64))
        self.tpot_bins = _tercile_masks(tpot_rows, measured.prompt_tokens + measured.output_tokens / 2.0)
        self.f_max_s = float(np.max(measured.ttft_s[ttft_rows])) if ttft_rows.any() else 1.0

    def params(self, x: np.ndarray, frontend_s: float) -> ResidualParams:
        return ResidualParams(max(0.0, float(x[0])) * 1e-3, frontend_s,
                              {fam: math.exp(float(x[1 + k])) for k, fam in enumerate(FAMILIES)})

    def simulate(self, x: np.ndarray) -> Replay:
        self.simulations += 1
        return replay(self.params(x, 0.0).apply(self.run), self.m, self.limit)

    def _ttft_residuals(self, ttft0: np.ndarray, f_s: float) -> np.ndarray:
        parts = [_quantile_residuals(ttft0[b] + f_s, self.m.ttft_s[b], QUANTILES) for b in self.ttft_bins]
        r = np.concatenate(parts) if parts else np.zeros(0)
        return r / math.sqrt(max(r.size, 1))

    def _tpot_residuals(self, rep: Replay) -> np.ndarray:
        parts = [_quantile_residuals(rep.tpot_s[b], self.m.tpot_s[b], QUANTILES) for b in self.tpot_bins]
        r = np.concatenate(parts) if parts else np.zeros(0)
        return r / math.sqrt(max(r.size, 1))

    def best_frontend_s(self, ttft0: np.ndarray) -> float:
        """The front-end delay minimising the TTFT residuals of this simulation (golden-section on [0, max TTFT])."""
        lo, hi = 0.0, self.f_max_s
        g = (math.sqrt(5) - 1) / 2
        loss = lambda f: float(np.sum(self._ttft_residuals(ttft0, f) ** 2))
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        fa, fb = loss(a), loss(b)
        for _ in range(60):
            if fa < fb:
                hi, b, fb = b, a, fa
                a = hi - g * (hi - lo)
                fa = loss(a)
            else:
                lo, a, fa = a, b, fb
                b = lo + g * (hi - lo)
                fb = loss(b)
        best = (lo + hi) / 2
        return 0.0 if loss(0.0) <= loss(best) else best

    def residuals(self, x: np.ndarray) -> tuple[np.ndarray, float]:
        """(residual vector, profiled front-end delay in s) at `x`."""
        return self.residuals_of(self.simulate(x))

    def residuals_of(self, rep: Replay) -> tuple[np.ndarray, float]:
        f = self.best_frontend_s(rep.ttft_s)
        return np.concatenate([self._ttft_residuals(rep.ttft_s, f), self._tpot_residuals(rep)]), f


def _clip(x: np.ndarray) -> np.ndarray:
    """Overhead >= 0 ms, scales within [0.05, 20]."""
    return np.array([max(0.0, x[0]), *np.clip(x[1:], *LN_SCALE_BOUNDS)])


def fit(run: RunConfig, measured: MeasuredRun, train: np.ndarray, *, client_limit: int | None = None,
        max_simulations: int = 48) -> FitResult:
    """Fit `ResidualParams` on the rows of `train`, starting from the values in `run`.

    Objective: the percentile residuals plus `PRIOR_WEIGHT` times the squared log-factor (in units of ln 2)
    of each scale away from its configured value.
    Nelder-Mead from the configured values (the calibrated profile is the prior) with a wide simplex
    (`SIMPLEX_STEP`), restarted once from the best vertex with a simplex a third the size; 5 of
    `max_simulations` are kept for the final replay and `identifiability`.
    """
    initial = ResidualParams.from_run(run)
    obj = _Objective(run, measured, np.asarray(train, dtype=bool), client_limit)
    x_init = np.array([initial.step_overhead_s * 1e3, *(math.log(initial.scale[f]) for f in FAMILIES)])
    history: list[dict] = []
    x0 = x_init

    def loss(x: np.ndarray) -> float:
        x = _clip(x)
        r, f = obj.residuals(x)
        value = float(r @ r) + PRIOR_WEIGHT * float(np.sum(((x[1:] - x_init[1:]) / math.log(2.0)) ** 2))
        if not history or value < history[-1]["loss"]:
            history.append({"params": obj.params(x, f).as_dict(), "loss": value})
        return value

    search = max_simulations - 5
    first = int(search * 0.7)
    x, _ = nelder_mead(loss, x0, SIMPLEX_STEP, first)
    x, _ = nelder_mead(loss, x, SIMPLEX_STEP / 3, search - first)
    x = _clip(x)
    r, f = obj.residuals(x)
    effect, jitter = identifiability(obj, x, r)
    weak = [name for name, e in effect.items() if e < max(2.0 * jitter, WEAK_EFFECT_PCT)]
    return FitResult(params=obj.params(x, f), initial=initial, loss_initial=history[0]["loss"],
                     loss_final=float(r @ r), improvements=len(history) - 1, simulations=obj.simulations,
                     effect_pct=effect, jitter_pct=jitter, weakly_identified=weak, history=history)


def nelder_mead(f, x0: np.ndarray, step: np.ndarray, max_evals: int) -> tuple[np.ndarray, float]:
    """Minimise `f` from `x0` with the standard Nelder-Mead moves (reflect 1, expand 2, contract 1/2, shrink
    1/2) and an initial simplex of `x0` plus one `step` along each axis; at most `max_evals` calls."""
    n = x0.size
    pts = [x0.astype(float)] + [x0 + np.eye(n)[k] * step[k] for k in range(n)]
    pts = pts[: max(1, max_evals)]
    vals = [f(p) for p in pts]
    evals = len(pts)
    if len(pts) < n + 1:
        i = int(np.argmin(vals))
        return pts[i], vals[i]
    while evals < max_evals:
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        centre = np.mean(pts[:-1], axis=0)
        xr = centre + (centre - pts[-1])
        fr = f(xr)
        evals += 1
        if fr < vals[0] and evals < max_evals:
            xe = centre + 2.0 * (centre - pts[-1])
            fe = f(xe)
            evals += 1
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        elif evals < max_evals:
            xc = centre + 0.5 * (pts[-1] - centre)
            fc = f(xc)
            evals += 1
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                for i in range(1, len(pts)):
                    if evals >= max_evals:
                        break
                    pts[i] = pts[0] + 0.5 * (pts[i] - pts[0])
                    vals[i] = f(pts[i])
                    evals += 1
    i = int(np.argmin(vals))
    return pts[i], vals[i]


def identifiability(obj: "_Objective", x: np.ndarray, r: np.ndarray) -> tuple[dict, float]:
    """How far each parameter moves the fitted percentiles, against the simulation's own jitter.

    `effect_pct[p]`: RMS shift of the percentiles (%, per metric) when the parameter moves by +1 ms (overhead)
    or +25% (an efficiency scale), simulated. `jitter_pct`: the same for a change of 1 µs of overhead, which
    does nothing physically but reshuffles which iteration each request lands in. A parameter whose effect is
    below twice the jitter, or below `WEAK_EFFECT_PCT` (the sampling noise of a percentile over a few hundred
    requests), is reported as weakly identified: this log cannot pin it down (4 extra simulations).
    NOTE: formal standard errors from s^2 (J^T J)^-1 are not reported: the jitter makes residuals correlated
    and they came out several times too small in the recovery tests.
    """
    groups = 2.0
    rms = lambda d: 100.0 * float(np.linalg.norm(d)) / math.sqrt(groups)
    jitter = rms(obj.residuals(x + np.array([1e-3, 0.0, 0.0]))[0] - r)
    effect = {}
    for k, (name, d) in enumerate(zip(["step_overhead_s", *(f"efficiency_scale.{f}" for f in FAMILIES)],
                                      [1.0, math.log(1.25), math.log(1.25)])):
        step = np.zeros_like(x)
        step[k] = d
        effect[name] = rms(obj.residuals(x + step)[0] - r)
    return effect, jitter
