"""One row through the project's own API, as a new user would run it: `compose_config` of Hydra overrides (the
row's hardware, model, formats, TP/DP/EP, engine preset, one instance, a closed-loop traffic block),
`load_run_config`, the scenario's workload and `simulate`. Cost model and host overhead (`conf/cost`) and the
scenario's front-end delay (the `smoke` scenario's 2 ms) are the configured defaults; the engine preset's own
front-end time (`frontend_*`, sim/core/instance/frontend.py) is fitted per serving preset (`fit.py`).

The benchmark client (`clients.py`): a closed loop of the row's concurrency, `rounds` (default 10) requests per
client, the warm-ups awaited before the measured run (so it starts from an idle server; the simulator has no
warm-up state, no compilation or autotuning, so the warm-ups are not simulated), and the lengths as the row's
client drew them: InferenceX's uniform [int(0.8 L), L] (the default), or every request exactly ISL/OSL (`client=`;
`source`: by the row's data source). `cost` sets the cost model's `profile` for every row (`measured`: the
AIConfigurator kernel grid of the row's GPU; default: the configured `auto`).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from inferplan.errors import InputError
from inferplan.interrupts import Interrupted
from sim.api import scenario_workload
from sim.compose import compose_config
from sim.config import load_run_config
from sim.core.pricing import pool_steps
from sim.simulate import simulate
from sim.validate.silicon.clients import CHOICES as CLIENT_CHOICES
from sim.validate.silicon.clients import client_of
from sim.validate.silicon.clients import traffic as client_traffic
from sim.validate.silicon.support import RowPlan

BASE = ["scenario=smoke", "metrics.progress=false", "++scenario.drain_timeout_s=86400"]
CLIENT_ROUNDS = 10      # the clients' request count: 10 x concurrency
DEFAULT_CLIENT = "inferred"
COST_PROFILES = ("auto", "measured", "analytical")   # or the path of a profile file


def cost_option(args: dict) -> str | None:
    """The command line's `cost=` (None where not given); an unknown value is an `InputError`."""
    value = args.get("cost")
    if value is None:
        return None
    if value not in COST_PROFILES and not Path(value).is_file():
        raise InputError("command line", "cost", f"must be one of {', '.join(COST_PROFILES)} or a profile file, "
                         f"got {value!r}", "give e.g. cost=measured")
    return value


def client_option(args: dict) -> str:
    """The command line's `client=` (default `inferred`: `clients.client_of`); an unknown value is an `InputError`."""
    value = args.get("client", DEFAULT_CLIENT)
    if value not in CLIENT_CHOICES:
        raise InputError("command line", "client", f"must be one of {', '.join(CLIENT_CHOICES)}, got {value!r}",
                         "give e.g. client=source")
    return value


def hydra_value(value) -> str:
    """A Python value in Hydra's override grammar: `{dp:4,weights:{experts:int4_wo}}`."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def traffic(plan: RowPlan, rounds: int = CLIENT_ROUNDS, client: str = DEFAULT_CLIENT) -> dict:
    """The closed-loop traffic block of a row: its clients, rounds x clients requests, the client's lengths."""
    return client_traffic(plan.row, client_of(plan.row, client), rounds)


def overrides(plan: RowPlan, rounds: int = CLIENT_ROUNDS, engine: dict | None = None, cost: str | None = None,
              client: str = DEFAULT_CLIENT) -> list[str]:
    """The Hydra overrides that express the row (also a `python -m sim` command line); `engine`: preset keys to
    override (`{frontend_per_request_s: 0.05}`, the fit's candidates); `cost`: the cost model's profile."""
    p = "scenario.pools.main"
    ov = [*BASE, f"{p}.instances={plan.instances}", f"{p}.hardware={plan.hardware}", f"{p}.model={plan.model}",
          f"++{p}.tp={plan.tp}", f"++{p}.weights_dtype={plan.weights_dtype}", f"engine={plan.engine}",
          *(f"++engine.{k}={v!r}" for k, v in {**dict(plan.engine_keys), **(engine or {})}.items())]
    if plan.kv_dtype != "bf16":
        ov.append(f"++{p}.kv_dtype={plan.kv_dtype}")
    if cost:
        ov.append(f"cost.profile={cost}")
    if plan.deployment:
        ov.append(f"++{p}.deployment={hydra_value(plan.deployment)}")
    if plan.decode is not None:  # a disaggregated row: `main` prefills, `decode` takes each request after it
        d = plan.decode
        decode = {"hardware": plan.hardware, "model": plan.model, "tp": d.tp, "weights_dtype": plan.weights_dtype,
                  "role": "decode", "instances": d.instances, **({"kv_dtype": plan.kv_dtype}
                                                                 if plan.kv_dtype != "bf16" else {}),
                  **({"deployment": d.deployment} if d.deployment else {})}
        ov += [f"++{p}.role=prefill", f"++{p}.decode_pool=decode", f"++scenario.pools.decode={hydra_value(decode)}"]
    return [*ov, "~scenario.traffic", f"+scenario.traffic={hydra_value(traffic(plan, rounds, client))}"]


def _stats(values: np.ndarray) -> dict:
    v = values[np.isfinite(values)]
    if not v.size:
        return {"p50": float("nan"), "mean": float("nan"), "p90": float("nan")}
    return {"p50": float(np.median(v)), "mean": float(v.mean()), "p90": float(np.percentile(v, 90))}


def simulate_plan(plan: RowPlan, rounds: int = CLIENT_ROUNDS, engine: dict | None = None, cost: str | None = None,
                  client: str = DEFAULT_CLIENT) -> dict:
    """The row's simulated TTFT and TPOT statistics over its completed requests (s)."""
    t0 = time.perf_counter()
    ov = overrides(plan, rounds, engine, cost, client)
    run = load_run_config(compose_config(ov))
    result = simulate(run, scenario_workload(run))
    if result.interrupted_by:
        raise Interrupted(result.interrupted_by)
    cols = result.requests
    done = np.asarray(cols["status"]) == "completed"
    ttft_all = np.asarray(cols["ttft_s"])
    ttft, tpot = _stats(ttft_all[done]), _stats(np.asarray(cols["tpot_s"])[done])
    # The first round (the first `clients` requests, all sent at t = 0 to an idle server) against the later ones:
    # where the rounds stay together the two agree, where they drift apart the later TTFT is the shorter.
    first = np.arange(len(done)) < plan.row.clients
    rounds_p50 = {"sim_ttft_round0_p50_s": _stats(ttft_all[done & first])["p50"],
                  "sim_ttft_later_p50_s": _stats(ttft_all[done & ~first])["p50"]}
    # The mean prompt (0.9 ISL) priced as one prefill alone on the row's instance: the front end's per-prefill
    # term's multiplier (`sim.validate.silicon.fit`).
    return {"requests": int(len(done)), "completed": int(done.sum()), **rounds_p50,
            "sim_prefill_alone_s": pool_steps(run, "main").prefill_alone_s(int(0.9 * plan.row.isl_tokens)),
            **{f"sim_ttft_{k}_s": v for k, v in ttft.items()}, **{f"sim_tpot_{k}_s": v for k, v in tpot.items()},
            "wall_s": round(time.perf_counter() - t0, 3), "client": client_of(plan.row, client),
            "overrides": " ".join(ov)}


def simulate_safely(plan: RowPlan, rounds: int = CLIENT_ROUNDS, engine: dict | None = None, cost: str | None = None,
                    client: str = DEFAULT_CLIENT) -> dict:
    """`simulate_plan`, with a failure as a result: `{"failed": "<one line>"}` (a pool worker must not die)."""
    try:
        return simulate_plan(plan, rounds, engine, cost, client)
    except Exception as err:  # noqa: BLE001 (any failure of one row is reported with that row)
        text = " ".join(str(err).split()) or type(err).__name__
        return {"failed": f"{type(err).__name__}: {text}"[:400], "client": client_of(plan.row, client),
                "overrides": " ".join(overrides(plan, rounds, engine, cost, client))}
