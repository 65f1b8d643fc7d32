"""One row through the project's own API, as a new user would run it: `compose_config` of Hydra overrides (the
row's hardware, model, formats, TP/DP/EP, engine preset, one instance, a closed-loop traffic block),
`load_run_config`, the scenario's workload and `simulate`. Cost model and host overhead (`conf/cost`) and the
scenario's front-end delay (the `smoke` scenario's 2 ms) are the configured defaults; the engine preset's own
front-end time (`frontend_*`, sim/core/instance/frontend.py) is fitted per engine (`fit.py`).

The benchmark client (InferenceX `benchmark_serving.py`, see the data README): `--max-concurrency C` closed loop
with `--request-rate inf`, `--num-prompts 10 x C`, input and output lengths uniform in [int(0.8 L), L]
(`--random-range-ratio 0.8`, `--ignore-eos`), and `2 x C` warm-up requests that complete before the measured run
starts (the client awaits them), so the measured run starts from an idle server. The simulator has no warm-up
state (no compilation or autotuning), so the warm-ups are not simulated: the run is the measured requests only.
`rounds` (default 10, the client's) sets requests = rounds x C.
"""
from __future__ import annotations

import time

import numpy as np

from inferplan.interrupts import Interrupted
from sim.api import scenario_workload
from sim.compose import compose_config
from sim.config import load_run_config
from sim.simulate import simulate
from sim.validate.silicon.support import RowPlan

BASE = ["scenario=smoke", "metrics.progress=false", "scenario.pools.main.instances=1",
        "++scenario.drain_timeout_s=86400"]
CLIENT_ROUNDS = 10      # the client's --num-prompts 10 x concurrency
RANGE_RATIO = 0.8       # --random-range-ratio


def hydra_value(value) -> str:
    """A Python value in Hydra's override grammar: `{dp:4,weights:{experts:int4_wo}}`."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def traffic(plan: RowPlan, rounds: int = CLIENT_ROUNDS) -> dict:
    """The closed-loop traffic block of a row: its clients, rounds x clients requests, uniform lengths."""
    row = plan.row

    def uniform(length: int) -> dict:
        return {"kind": "uniform", "low_tokens": max(1, int(RANGE_RATIO * length)), "high_tokens": length}
    return {"kind": "closed_loop", "clients": row.clients, "requests": rounds * row.clients,
            "lengths": {"kind": "independent", "prompt": uniform(row.isl_tokens), "output": uniform(row.osl_tokens)}}


def overrides(plan: RowPlan, rounds: int = CLIENT_ROUNDS, engine: dict | None = None) -> list[str]:
    """The Hydra overrides that express the row (also a `python -m sim` command line); `engine`: preset keys to
    override (`{frontend_per_request_s: 0.05}`, the fit's candidates)."""
    p = "scenario.pools.main"
    ov = [*BASE, f"{p}.hardware={plan.hardware}", f"{p}.model={plan.model}", f"++{p}.tp={plan.tp}",
          f"++{p}.weights_dtype={plan.weights_dtype}", f"engine={plan.engine}",
          *(f"++engine.{k}={v!r}" for k, v in (engine or {}).items())]
    if plan.deployment:
        ov.append(f"++{p}.deployment={hydra_value(plan.deployment)}")
    return [*ov, "~scenario.traffic", f"+scenario.traffic={hydra_value(traffic(plan, rounds))}"]


def _stats(values: np.ndarray) -> dict:
    v = values[np.isfinite(values)]
    if not v.size:
        return {"p50": float("nan"), "mean": float("nan"), "p90": float("nan")}
    return {"p50": float(np.median(v)), "mean": float(v.mean()), "p90": float(np.percentile(v, 90))}


def simulate_plan(plan: RowPlan, rounds: int = CLIENT_ROUNDS, engine: dict | None = None) -> dict:
    """The row's simulated TTFT and TPOT statistics over its completed requests (s)."""
    t0 = time.perf_counter()
    ov = overrides(plan, rounds, engine)
    run = load_run_config(compose_config(ov))
    result = simulate(run, scenario_workload(run))
    if result.interrupted_by:
        raise Interrupted(result.interrupted_by)
    cols = result.requests
    done = np.asarray(cols["status"]) == "completed"
    ttft, tpot = _stats(np.asarray(cols["ttft_s"])[done]), _stats(np.asarray(cols["tpot_s"])[done])
    return {"requests": int(len(done)), "completed": int(done.sum()),
            **{f"sim_ttft_{k}_s": v for k, v in ttft.items()}, **{f"sim_tpot_{k}_s": v for k, v in tpot.items()},
            "wall_s": round(time.perf_counter() - t0, 3), "overrides": " ".join(ov)}


def simulate_safely(plan: RowPlan, rounds: int = CLIENT_ROUNDS, engine: dict | None = None) -> dict:
    """`simulate_plan`, with a failure as a result: `{"failed": "<one line>"}` (a pool worker must not die)."""
    try:
        return simulate_plan(plan, rounds, engine)
    except Exception as err:  # noqa: BLE001 (any failure of one row is reported with that row)
        text = " ".join(str(err).split()) or type(err).__name__
        return {"failed": f"{type(err).__name__}: {text}"[:400], "overrides": " ".join(overrides(plan, rounds, engine))}
