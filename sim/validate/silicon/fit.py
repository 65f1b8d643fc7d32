"""The engine time outside the kernels, fitted per engine version (serving preset) on the measured H100/H200 runs.

`python -m sim.validate.silicon.fit [base=<rows.csv>] [per_model=N] [jobs=N] [systems=h100_sxm,h200_sxm]
[refine=true] [search=<rows per model>] [cost=measured] [client=inferred|inferencex|fixed|source] [engines=vllm,...]
[terms=<key>,...] [out=<file.json>] [write=true]`

What is fitted: a serving preset's front-end time (sim/core/instance/frontend.py), one fit per preset (the engine
versions it serves: `support.SERVE_PRESETS`; a row's `preset` column), never per model,
delay_s = frontend_per_request_s + frontend_per_prompt_token_s x prompt tokens + frontend_per_stream_s x streams
+ (frontend_per_prefill_s + frontend_per_prefill_stream_s x streams) x the prompt's prefill alone (seconds, priced
by the cost model) + (frontend_per_step + frontend_per_step_token x prompt tokens) x the instance's iteration time
(the row's simulated TPOT median stands for it here); which terms each engine fits: `FITTED` (vLLM per prompt token,
per prefill per stream and per step, TensorRT-LLM the two per-prefill ones, SGLang the per-request, per-stream and
per-step-per-prompt-token ones), `terms=<key>,...` another set for every engine. `engines=` fits (and writes) those
engines only.
Everything else (kernel times, the cost model's step overhead, the scheduler) stays as configured.

How: every row is simulated once with the front-end time at zero (or read from `base=`, a matrix `rows.csv`
simulated with it at zero: `python -m sim.validate.silicon systems=h100_sxm,h200_sxm frontend=none out=<dir>`): the
gap to the measured TTFT median is
measured - simulated. The delay adds to each request's TTFT, so the fit is a linear one over the rows' features
[1, the mean prompt's tokens (0.9 x ISL: uniform in [0.8 ISL, ISL]), streams (clients - 1: a closed loop holds the
other clients' requests), the mean prompt's prefill alone on the row's instance (rows.csv `sim_prefill_alone_s`),
that prefill x streams, the simulated TPOT median (rows.csv `sim_tpot_p50_s`), that x the mean prompt's tokens],
minimising the sum of absolute relative TTFT errors (L1, each coefficient >= 0: `fit_l1`; the targets score the
median, which a direct fit reaches only by a local search whose answer depends on its path). The additive view
ignores that a delayed request also delays its client's next one (less load: a slightly shorter simulated queue);
the matrix re-run with the fitted presets is the check. Rows whose simulated TPOT misses the measured one by more
than `DECODE_OFF_PCT` are not fitted (`fittable`: their run was not what their columns record).

`refine=true`: the `base=` rows were simulated with the presets' current front-end values (their `preset` column,
read from conf/engine): those delays are taken out of each row's simulated TTFT first, so the new fit starts from
a simulation that already carried them (one fixed-point step: it accounts for the lighter load they cause).

`write=true` writes each preset's values into it (`PRESETS`: conf/engine/*_serve.yaml), replacing
the preset's front-end block (from its `# Front-end time` line to the end) with the values, the command, the rows
and the errors, so a plain run uses them.

`search=N`: the linear fit is then checked by simulation: N rows per (engine, model) are simulated with its
coefficients scaled by each of `fit_search.SCALES`, and each engine keeps the scale of least median |TTFT| +
|TPOT| error (a coarse grid search on the one direction the additive view gets wrong: its feedback on the load).

Reported: the in-sample error and leave-one-model-out (LOMO: each model scored with the coefficients fitted on the
other models of its preset, or, where its preset served no other model, on the other models of the engine's other
presets, `fitted_on`; an engine with one model is scored leave-one-ISL-out instead, said so).
Why per preset: the versions disagree on the time beyond the kernels that a fit can carry across models. At light
load (`python -m sim.validate.silicon.beyond`) SGLang 0.5.9's two models agree in seconds (GLM-5 0.22 s, Qwen3.5-397B
0.26 s beyond the simulated kernels at <= 8 clients) while SGLang 0.5.1's Qwen3-32B rows measure what their bursts
queue and little more; one SGLang fit carried 0.13 s to Qwen3.5-397B, 30% short (docs/validation.md, "One fit per
serving preset"). The versions are also the collections (client): the rows cannot tell the two apart.
Without `base=`, `per_model` rows per (engine, model) are simulated (spread over concurrency and shape).
"""
from __future__ import annotations

import json
import sys
from itertools import combinations
from pathlib import Path

import numpy as np

from inferplan.config.yaml_files import read_yaml_mapping
from inferplan.errors import InputError, exit_on_input_error
from sim.validate.silicon.fit_presets import PRESETS, write_presets
from sim.validate.silicon.fit_search import scale_search, simulated_base
from sim.validate.silicon.fit_terms import DECODE_OFF_PCT, KEYS, ZERO, decode_is_off
from sim.validate.silicon.runner import read_records
from sim.validate.silicon.simulate_row import client_option, cost_option

__all__ = ["DECODE_OFF_PCT", "FITTED", "KEYS", "PRESETS", "SYSTEMS", "ZERO", "decode_off", "fit_engine", "fit_l1",
           "fittable", "main", "without_frontend"]

# The terms each engine's fit takes by default (indices into KEYS; `terms=` picks others, for every engine).
# vLLM: seconds per prompt token (tokenising and hashing the prompt: 16 us per token fitted), the prompt's own
# prefill price per stream held (it waits behind the other streams' prefills) and iterations (a near-constant
# number of the instance's iterations across concurrency, TP and models: docs/validation.md, "TTFT in
# iterations"); held out, simulated, vLLM 16.5% -> 13.1% and its partitions beyond 30% 8 -> 1 against the
# iterations alone (docs/validation.md, "vLLM's delay in tokens, prefills and iterations").
# TensorRT-LLM: per second of the prompt's own prefill price and that per stream, on the first token's path:
# its rows' TTFT is ~2-4 prefills at 8 clients and grows by ~0.03-0.05 prefill per client at every output length,
# where the iteration delay grew with the longer iterations of short outputs (held out, simulated: 24.2% ->
# 23.7%; additive: 26.3% -> 25.1%; docs/validation.md, "TensorRT-LLM's delay in prefills").
# SGLang: per request, per stream and iterations per prompt token, at `entry`. With GLM-5's attention priced from
# its measured module, the delay in proportion to the prefill no longer carries across SGLang's three models
# (fitted on two, 47% short for Qwen3.5-397B and 21% long for GLM-5); iterations per prompt token carry the model,
# TP and the load through the iteration time (held out, simulated: 17.4% -> 16.1% over all engines, SGLang's
# partitions beyond 30% 5 -> 3; docs/validation.md, "SGLang's delay in iterations per prompt token"). (Before the
# gap-analysis rows' zero-spread client, an iteration delay had lost their bursts: held out 22.0% -> 41.6%.)
TOKEN_PREFILL_STEP_TERMS = (1, 4, 5)
REQUEST_STREAM_STEP_TOKEN_TERMS = (0, 2, 6)
PREFILL_ONLY_TERMS = (3, 4)
FITTED = {"vllm": TOKEN_PREFILL_STEP_TERMS, "trtllm": PREFILL_ONLY_TERMS, "sglang": REQUEST_STREAM_STEP_TOKEN_TERMS}
SYSTEMS = ("h100_sxm", "h200_sxm")


def _finite(value) -> float:
    """A record's number, 0 where it is missing or not finite (a column the rows did not record)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 0.0
    return v if np.isfinite(v) else 0.0


def features(rec: dict) -> np.ndarray:
    """[1, mean prompt tokens, streams, the mean prompt's prefill alone, that x streams] of a row (the multipliers
    of KEYS)."""
    streams = max(0.0, rec["clients"] - 1.0)
    prefill_s, step_s = (_finite(rec.get(k)) for k in ("sim_prefill_alone_s", "sim_tpot_p50_s"))
    tokens = 0.9 * rec["isl_tokens"]
    return np.array([1.0, tokens, streams, prefill_s, prefill_s * streams, step_s, step_s * tokens])


def decode_off(records: list[dict]) -> dict[str, int]:
    """Per engine, the simulated rows `fittable` leaves out for a decode off by more than `DECODE_OFF_PCT`."""
    out: dict[str, int] = {}
    for r in records:
        if r["status"] == "simulated" and decode_is_off(r):
            out[r["engine"]] = out.get(r["engine"], 0) + 1
    return out


def fittable(records: list[dict]) -> list[dict]:
    """The simulated records a fit can use: a finite simulated TTFT median, a measured TTFT > 0 and a simulated
    TPOT median within `DECODE_OFF_PCT` of the measured one."""
    return [r for r in records if r["status"] == "simulated" and np.isfinite(r["sim_ttft_p50_s"])
            and r["measured_ttft_s"] > 0 and not decode_is_off(r)]


def _fit(x: np.ndarray, sim: np.ndarray, meas: np.ndarray, fitted: tuple[int, ...]) -> np.ndarray:
    """All KEYS' coefficients: the `fitted` ones (indices into KEYS) by `fit_l1`, the rest 0."""
    c = np.zeros(len(KEYS))
    cols = list(fitted)
    c[cols] = fit_l1(x[:, cols], sim, meas)
    return c


def terms_option(args: dict) -> tuple[int, ...] | None:
    """The `terms=` option: the KEYS to fit for every engine (comma-separated); None: each engine's FITTED."""
    if "terms" not in args:
        return None
    names = [t for t in args["terms"].split(",") if t]
    if not names or (unknown := [t for t in names if t not in KEYS]):
        raise InputError("command line", "terms", f"{', '.join(unknown) if names else 'nothing'} is not a front-end "
                         "key", f"give one or more of {', '.join(KEYS)}, comma-separated")
    return tuple(KEYS.index(t) for t in names)


def fit_l1(x: np.ndarray, sim: np.ndarray, meas: np.ndarray, lower: np.ndarray | None = None,
           iters: int = 60) -> np.ndarray:
    """Coefficients c >= `lower` (default 0) minimising sum |sim + x @ c - meas| / meas (L1, convex): on every
    face of the bounds (each subset of the coefficients free, the rest at their bound) the free ones by IRLS, and
    of the faces whose free coefficients stay within their bounds, the one of least loss."""
    n = x.shape[1]
    lo = np.zeros(n) if lower is None else np.asarray(lower, float)
    best, best_loss = lo.copy(), _l1_loss(x, sim, meas, lo)
    for k in range(1, n + 1):
        for free in combinations(range(n), k):
            cols = list(free)
            c = lo.copy()
            c[cols] = 0.0
            sol = _irls(x[:, cols], sim + x @ c, meas, iters)
            if (sol < lo[cols]).any():
                continue
            c[cols] = sol
            loss = _l1_loss(x, sim, meas, c)
            if loss < best_loss - 1e-15:
                best, best_loss = c, loss
    return best


def _l1_loss(x: np.ndarray, sim: np.ndarray, meas: np.ndarray, c: np.ndarray) -> float:
    return float(np.sum(np.abs(sim + x @ c - meas) / meas))


def _irls(x: np.ndarray, sim: np.ndarray, meas: np.ndarray, iters: int) -> np.ndarray:
    """Unbounded coefficients minimising sum |sim + x @ c - meas| / meas (iteratively reweighted least squares,
    each row's weight 1 / max(|relative error|, 1%))."""
    w = np.ones(len(meas))
    c = np.zeros(x.shape[1])
    for _ in range(iters):
        sw = np.sqrt(w)
        c, *_ = np.linalg.lstsq(x / meas[:, None] * sw[:, None], (meas - sim) / meas * sw, rcond=None)
        w = 1.0 / np.maximum(np.abs((sim + x @ c - meas) / meas), 0.01)
    return c


def errors_pct(x: np.ndarray, sim: np.ndarray, meas: np.ndarray, c: np.ndarray) -> np.ndarray:
    return 100.0 * (sim + x @ c - meas) / meas


def summary(err: np.ndarray) -> dict:
    if not err.size:
        return {"rows": 0}
    return {"rows": int(err.size), "median_abs_pct": round(float(np.median(np.abs(err))), 1),
            "bias_pct": round(float(np.median(err)), 1)}


def _arrays(recs: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, simulated TTFT median, measured TTFT) of records."""
    return (np.array([features(r) for r in recs]).reshape(len(recs), len(KEYS)),
            np.array([r["sim_ttft_p50_s"] for r in recs]), np.array([r["measured_ttft_s"] for r in recs]))


def _fit_preset(mine: list[dict], others: list[dict], fitted: tuple[int, ...], by: str,
                served: set[str] = frozenset()) -> tuple[dict, tuple[np.ndarray, ...]]:
    """One serving preset's fit on its own rows `mine`, and its held-out coefficients per `by` value (model, or
    input length for an engine with one model; `served`: models the preset also ran whose rows are not fitted, so
    that they are scored too): fitted on the preset's rows without that value, or, where the preset has none, on
    the engine's other presets' rows without it (`fitted_on`). Returns (the preset's document, (held-out errors,
    in-sample errors, errors with no front-end time))."""
    x, sim, meas = _arrays(mine)
    c = _fit(x, sim, meas, fitted)
    per, held = {}, []
    for value in sorted({r[by] for r in mine} | (set(served) if by == "model" else set())):
        test = [r for r in mine if r[by] == value]
        train, source = [r for r in mine if r[by] != value], "preset"
        if not train:
            train, source = [r for r in others if r[by] != value], "engine"
        cm = _fit(*_arrays(train), fitted) if train else np.zeros(len(KEYS))
        e = errors_pct(*_arrays(test), cm)
        held.append(e)
        per[str(value)] = {**summary(e), "fitted_on": source, **dict(zip(KEYS, (float(v) for v in cm)))}
    before = errors_pct(x, sim, meas, np.zeros(len(KEYS)))
    doc = {"values": dict(zip(KEYS, (float(v) for v in c))), "rows": len(mine),
           "models": sorted({r["model"] for r in mine}), "before": summary(before),
           "in_sample": summary(errors_pct(x, sim, meas, c)), "held_out": summary(np.concatenate(held)),
           "held_out_each": per}
    return doc, (np.concatenate(held), errors_pct(x, sim, meas, c), before)


def fit_engine(recs: list[dict], fitted: tuple[int, ...], scored: list[dict] | None = None) -> dict:
    """One engine's fit of the `fitted` terms on its fittable `recs`: one per serving preset (the row's `preset`
    column: the engine versions it serves, `support.SERVE_PRESETS`), never per model, each with its in-sample
    error and its leave-one-model-out (or -ISL-out) coefficients and error (`_fit_preset`); the engine's figures
    pool its presets' rows. `scored`: the engine's simulated records, fittable or not: every (preset, model) among
    them gets held-out coefficients (a model whose rows in a preset are all left out of the fit is still scored)."""
    # In row-id order: a matrix writes its rows as they finish, and the sums of a fit in another order differ in
    # their last bits (the same rows must give the same coefficients, bit for bit).
    recs = sorted(recs, key=lambda r: r["id"])
    models = sorted({r["model"] for r in recs})
    by = "model" if len(models) > 1 else "isl_tokens"
    presets, errs = {}, []
    for preset in sorted({r["preset"] for r in recs}):
        mine = [r for r in recs if r["preset"] == preset]
        served = {r["model"] for r in scored or () if r["preset"] == preset}
        presets[preset], e = _fit_preset(mine, [r for r in recs if r["preset"] != preset], fitted, by, served)
        errs.append(e)
    held, ins, before = (np.concatenate([e[i] for e in errs]) for i in range(3))
    return {"terms": [KEYS[i] for i in fitted], "rows": len(recs), "models": models, "presets": presets,
            "before": summary(before), "in_sample": summary(ins), "held_out_by": by, "held_out": summary(held)}


def preset_frontend(preset: str) -> np.ndarray:
    """The front-end coefficients in conf/engine/<preset>.yaml (zeros where a key is absent)."""
    from sim.resolve import ENGINE_DIR

    spec = read_yaml_mapping(ENGINE_DIR / f"{preset}.yaml")
    return np.array([float(spec.get(k, 0.0) or 0.0) for k in KEYS])


def without_frontend(recs: list[dict]) -> list[dict]:
    """`recs` with the delay their presets added taken out of the simulated TTFT median."""
    cache: dict[str, np.ndarray] = {}
    out = []
    for r in recs:
        v = cache.setdefault(r["preset"], preset_frontend(r["preset"]))
        out.append({**r, "sim_ttft_p50_s": r["sim_ttft_p50_s"] - float(features(r) @ v)})
    return out


def base_frontend(rows_csv: Path) -> str:
    """The `frontend=` option the matrix beside `rows_csv` ran with (its matrix.json; `preset` when not recorded)."""
    try:
        options = json.loads((rows_csv.parent / "matrix.json").read_text()).get("options") or {}
    except (OSError, ValueError, AttributeError):
        return "preset"
    return str(options.get("frontend") or "preset")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") or "=" not in a for a in argv):
        print(__doc__)
        return
    args = dict(a.split("=", 1) for a in argv)
    systems = tuple(args.get("systems", ",".join(SYSTEMS)).split(","))
    with exit_on_input_error():
        cost, client = cost_option(args), client_option(args)
        wanted = set(args["engines"].split(",")) if "engines" in args else set(PRESETS)
        if unknown := wanted - set(PRESETS):
            raise InputError("command line", "engines", f"{', '.join(sorted(unknown))} unknown",
                             f"give one or more of {', '.join(PRESETS)}, comma-separated")
        fitted = terms_option(args)
        if "base" in args and args.get("refine", "false").lower() == "true" and \
                base_frontend(Path(args["base"])) == "none":
            raise InputError(args["base"], "frontend", "this matrix ran with no front-end time (frontend=none), "
                             "so there is nothing to take out", "drop refine=true")
    if "base" in args:
        recs = [r for r in read_records(Path(args["base"])) if r["status"] == "simulated" and r["system"] in systems]
        source = f"base={args['base']} (all its simulated rows)"
        if args.get("refine", "false").lower() == "true":
            recs = without_frontend(recs)
            source += ", refined (the presets' front-end delays taken out first)"
    else:
        per_model = int(args.get("per_model", 12))
        recs = [r for r in simulated_base(systems, per_model, int(args.get("jobs", 2)), cost, client)
                if r["status"] == "simulated"]
        source = f"{per_model} rows per (engine, model), simulated with the front-end time at zero"
    off, simulated = decode_off(recs), recs
    recs = [r for r in fittable(recs) if r["engine"] in wanted]
    doc = {"source": source, "systems": list(systems), "engines": {}}
    for engine in sorted({r["engine"] for r in recs}):
        doc["engines"][engine] = fit_engine([r for r in recs if r["engine"] == engine],
                                            fitted if fitted is not None else FITTED[engine],
                                            [r for r in simulated if r["engine"] == engine])
        doc["engines"][engine]["decode_off"] = off.get(engine, 0)
    if "search" in args:
        scale_search(doc, systems, int(args["search"]), int(args.get("jobs", 2)), cost, client)
    text = json.dumps(doc, indent=1)
    if "out" in args:
        Path(args["out"]).write_text(text + "\n")
    print(text)
    if args.get("write", "false").lower() == "true":
        command = "python -m sim.validate.silicon.fit " + " ".join(
            f"{k}={v}" for k, v in args.items() if k not in ("write", "out"))
        for path in write_presets(doc, command):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
