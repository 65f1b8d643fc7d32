"""Replay a measured run: exactly its send times and lengths through the configured deployment.

`replay(run, measured)` builds a `Workload` from the measured rows (sorted by send time; ties keep log order),
simulates it and aligns every simulated column back to the measured rows. When the log's send times were
reconstructed and the client capped in-flight requests (`max_concurrency`), the cap is the client's, not the
server's: the replay iterates send times through `arrivals.client_send_times` until they stop moving.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from scenarios.workload import Workload
from inferplan.config.run import RunConfig
from sim.results.result import SimResult
from sim.simulate import simulate
from sim.validate.arrivals import client_send_times
from sim.validate.measured import MeasuredRun

# Op families whose efficiency the fit scales together (ops as in conf/cost/roofline.yaml). `allreduce` is
# left alone: a single-server log with tp=1 cannot see it.
OP_FAMILIES = {"gemm": ("gemm", "moe_gemm", "elementwise"),
               "attention": ("attn_prefill", "attn_decode", "attn_mla_decode")}


@dataclass(frozen=True)
class ResidualParams:
    """What a kernel profile cannot see: host overhead per iteration, front-end delay per request (both s) and a
    multiplier on the achieved efficiency per op family (1.0 = as calibrated)."""

    step_overhead_s: float
    frontend_overhead_s: float
    scale: dict  # family -> multiplier

    @classmethod
    def from_run(cls, run: RunConfig) -> "ResidualParams":
        es = run.cost.efficiency_scale
        return cls(run.cost.step_overhead_s, run.scenario.frontend_overhead_s,
                   {fam: float(es.get(ops[0], 1.0)) for fam, ops in OP_FAMILIES.items()})

    def efficiency_scale(self) -> dict[str, float]:
        return {op: float(self.scale[fam]) for fam, ops in OP_FAMILIES.items() for op in ops}

    def apply(self, run: RunConfig) -> RunConfig:
        cost = dataclasses.replace(run.cost, step_overhead_s=float(self.step_overhead_s),
                                   efficiency_scale={**run.cost.efficiency_scale, **self.efficiency_scale()})
        scenario = dataclasses.replace(run.scenario, frontend_overhead_s=float(self.frontend_overhead_s))
        return dataclasses.replace(run, cost=cost, scenario=scenario)

    def as_dict(self) -> dict:
        return {"step_overhead_s": self.step_overhead_s, "frontend_overhead_s": self.frontend_overhead_s,
                "efficiency_scale": {fam: self.scale[fam] for fam in OP_FAMILIES}}


@dataclass
class Replay:
    """Simulated per-request columns aligned to the measured rows (NaN where the request did not complete)."""

    send_s: np.ndarray        # [R] simulated arrival (client send) times
    ttft_s: np.ndarray        # [R]
    tpot_s: np.ndarray        # [R]
    e2e_s: np.ndarray         # [R]
    status: np.ndarray        # [R] completed | rejected | unfinished
    busy_fraction: np.ndarray  # [R] simulated busy fraction of the serving pool in the interval of the arrival
    running: np.ndarray       # [R] simulated running requests (fleet) at the end of that interval
    result: SimResult
    semaphore_rounds: int = 0
    itl: dict = dataclasses.field(default_factory=dict)  # the run's ITL (summary.json latency_s.itl): p50..mean, s

    @property
    def completed(self) -> np.ndarray:
        return self.status == "completed"


def _simulate(run: RunConfig, measured: MeasuredRun, send_s: np.ndarray) -> Replay:
    order = np.argsort(send_s, kind="stable")
    wl = Workload.from_columns(send_s[order], measured.prompt_tokens[order], measured.output_tokens[order],
                               source=f"measured:{measured.path}")
    result = simulate(run, wl)
    cols = result.requests
    pos = np.empty_like(order)
    pos[order] = np.arange(len(order))  # measured row k is workload row pos[k]
    ts_t = np.array([r["t_s"] for r in result.timeseries]) if result.timeseries else np.array([np.inf])
    busy = np.array([r["busy_fraction"] for r in result.timeseries]) if result.timeseries else np.zeros(1)
    running = np.array([r["running"] for r in result.timeseries]) if result.timeseries else np.zeros(1)
    at = np.minimum(np.searchsorted(ts_t, cols["arrival_s"] + run.scenario.frontend_overhead_s, side="left"),
                    len(ts_t) - 1)
    status = np.asarray(cols["status"][pos])  # (an object array of the labels, in measured order)
    done = status == "completed"

    def aligned(name: str) -> np.ndarray:
        return np.where(done, cols[name][pos], np.nan)

    return Replay(send_s=send_s, ttft_s=aligned("ttft_s"), tpot_s=aligned("tpot_s"), e2e_s=aligned("e2e_s"),
                  status=status, busy_fraction=busy[at][pos], running=running[at][pos].astype(np.float64),
                  result=result, itl=dict(result.summary["latency_s"]["itl"]))


def replay(run: RunConfig, measured: MeasuredRun, client_limit: int | None = None, max_rounds: int = 8) -> Replay:
    """Simulate `measured` on `run`. `client_limit`: the client's in-flight cap to emulate (None: send times are
    final, as in logs that record them after the semaphore)."""
    if measured.arrival_s is None:
        raise ValueError("measured.arrival_s is None: call arrivals.reconstruct first")
    scheduled = measured.arrival_s
    out = _simulate(run, measured, scheduled)
    if client_limit is None or client_limit >= len(measured):
        return out
    # Send order is log order; e2e of a request not completed in the sim: assume it held its slot to the end.
    by_log = np.argsort(measured.index, kind="stable")
    for rounds in range(1, max_rounds + 1):
        e2e = np.where(np.isfinite(out.e2e_s), out.e2e_s, np.nanmax(out.e2e_s) if np.isfinite(out.e2e_s).any() else 0.0)
        send = np.empty_like(scheduled)
        send[by_log] = client_send_times(scheduled[by_log], e2e[by_log], int(client_limit))
        moved = float(np.max(np.abs(send - out.send_s)))
        if moved < 1e-4:
            break
        out = _simulate(run, measured, send)
        out.semaphore_rounds = rounds
    return out
