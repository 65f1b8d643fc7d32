"""Fit the residual parameters (`ResidualParams`) to the training requests of a measured run.

Method: Levenberg-Marquardt over x = [step_overhead_ms, ln scale_gemm, ln scale_attention], with the front-end
delay profiled out. Every evaluation simulates the *whole* log (so each training request sees the same batch
dynamics as in reality: the held-out requests are still there, occupying batches) and the loss reads the
training requests only; the held-out requests never enter the loss. Because a front-end delay shifts the whole
simulation by a constant (instances start idle), it is solved exactly per evaluation by a 1-D search instead of
being simulated (`Replay.shifted`). The Jacobian is by forward differences (3 simulations per iteration), with
steps large enough to see through the simulation's jitter.

The loss compares distributions, not request pairs: ln(sim/measured) of the 10th..90th percentiles of TTFT
within each prompt-length tercile, and of the 5th..95th percentiles of TPOT (each metric weighted equally).
NOTE: a per-request loss looks more informative but is unusable for optimisation: which iteration a request
lands in flips with the smallest parameter change, so per-request TTFTs decorrelate and the loss is flat noise
everywhere except at the exact generating parameters. Percentiles average that out, and they are also the only
comparable quantity when send times were reconstructed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sim.config import RunConfig
from sim.validate.measured import MeasuredRun
from sim.validate.replay import OP_FAMILIES, Replay, ResidualParams, replay

QUANTILES = np.arange(10, 100, 10)
BINS = 3  # terciles: of the prompt length (TTFT) and of the mean decode context, prompt + output / 2 (TPOT)
FAMILIES = tuple(OP_FAMILIES)          # the scaled families, in x order after the overhead
FD_STEP = np.array([1.0, 0.1, 0.15])  # ms, ln-units, ln-units
LN_SCALE_BOUNDS = (math.log(0.05), math.log(20.0))
NOT_COMPLETED_RESIDUAL = math.log(10.0)  # a training request the simulation did not complete counts as 10x off


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
    iterations: int
    simulations: int
    effect_pct: dict = field(default_factory=dict)
    jitter_pct: float = math.nan
    weakly_identified: list = field(default_factory=list)
    history: list = field(default_factory=list)  # [{"params": ..., "loss": ...}] of accepted steps

    def as_dict(self) -> dict:
        return {"params": self.params.as_dict(), "initial": self.initial.as_dict(),
                "loss_initial": self.loss_initial, "loss_final": self.loss_final, "iterations": self.iterations,
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
        rep = self.simulate(x)
        f = self.best_frontend_s(rep.ttft_s)
        return np.concatenate([self._ttft_residuals(rep.ttft_s, f), self._tpot_residuals(rep)]), f


def _clip(x: np.ndarray) -> np.ndarray:
    return np.array([max(0.0, x[0]), *np.clip(x[1:], *LN_SCALE_BOUNDS)])


def fit(run: RunConfig, measured: MeasuredRun, train: np.ndarray, *, client_limit: int | None = None,
        max_simulations: int = 48) -> FitResult:
    """Fit `ResidualParams` on the rows of `train`, starting from the values in `run`.

    Damped Gauss-Newton: each iteration measures the Jacobian by central differences with wide steps
    (`FD_STEP`: wide enough that the simulation's jitter is small against the change), solves the
    Levenberg-Marquardt system and accepts the step if the loss falls, else halves it (twice at most).
    Stops when an accepted step moves every parameter by less than a quarter of its difference step, when no
    step helps, or after `max_simulations` (4 of them kept for `identifiability`).
    """
    initial = ResidualParams.from_run(run)
    obj = _Objective(run, measured, np.asarray(train, dtype=bool), client_limit)
    budget = max_simulations - 4
    x = np.array([initial.step_overhead_s * 1e3, *(math.log(initial.scale[f]) for f in FAMILIES)])
    r, f = obj.residuals(x)
    loss0 = loss = float(r @ r)
    history = [{"params": obj.params(x, f).as_dict(), "loss": loss}]
    it = 0
    while obj.simulations + x.size + 1 <= budget:
        it += 1
        jac = np.empty((r.size, x.size))
        for k in range(x.size):
            e = np.zeros_like(x)
            e[k] = FD_STEP[k]
            jac[:, k] = (obj.residuals(x + e)[0] - r) / FD_STEP[k]
        jtj = jac.T @ jac
        step = np.linalg.solve(jtj + 1e-3 * np.diag(np.maximum(np.diag(jtj), 1e-9)), -jac.T @ r)
        accepted = False
        for _ in range(3):
            x_new = _clip(x + step)
            if obj.simulations >= budget:
                break
            r_new, f_new = obj.residuals(x_new)
            loss_new = float(r_new @ r_new)
            if loss_new < loss:
                accepted = True
                small = np.all(np.abs(x_new - x) < FD_STEP / 4)
                x, r, f, loss = x_new, r_new, f_new, loss_new
                history.append({"params": obj.params(x, f).as_dict(), "loss": loss})
                break
            step = step / 2
        if not accepted or small:
            break
    effect, jitter = identifiability(obj, x, r)
    weak = [name for name, e in effect.items() if e < 2.0 * jitter]
    return FitResult(params=obj.params(x, f), initial=initial, loss_initial=loss0, loss_final=loss, iterations=it,
                     simulations=obj.simulations, effect_pct=effect, jitter_pct=jitter, weakly_identified=weak,
                     history=history)


def identifiability(obj: "_Objective", x: np.ndarray, r: np.ndarray) -> tuple[dict, float]:
    """How far each parameter moves the fitted percentiles, against the simulation's own jitter.

    `effect_pct[p]`: RMS shift of the percentiles (%, per metric) when the parameter moves by +1 ms (overhead)
    or +25% (an efficiency scale), simulated. `jitter_pct`: the same for a change of 1 µs of overhead, which
    does nothing physically but reshuffles which iteration each request lands in. A parameter whose effect is
    below twice the jitter is reported as weakly identified: this log cannot pin it down, and its fitted value
    is mostly its starting value plus noise (4 extra simulations).
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
