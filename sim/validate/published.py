"""`python -m sim.validate.published [csv=<path>] [out=<dir>] [rows=A01,G01]`: published serving results (default:
the A100 table shipped in `sim/validate/data/`, a copy of `shared/validation/`), simulated as documented and
compared row by row; prints per-row signed errors and the median |error| per metric family.

Nothing here is fitted to those numbers: every row runs with the configured defaults (docs/cost-model.md) and
the engine limits its source states. What a row does not state is an assumption, printed with the row:
* ShareGPT lengths (not available offline): a stand-in, `sharegpt_standin()` — lognormal prompt and output
  lengths (sigma 1.0) cut by the client's ShareGPT filter (both >= 4, prompt <= 1,024, prompt + output <= 2,048),
  with medians solved so the filtered means are 194.3 output tokens (implied by the published rows themselves:
  output tok/s / req/s of A09 and A10, identical for both engines because the client sends `ignore_eos`, so it is
  a property of the dataset sample, not of an engine) and 215 prompt tokens (assumption: the figure vLLM's
  benchmark prints for 1,000 ShareGPT prompts in commonly posted runs; not verifiable here). Each ShareGPT row is
  also simulated with the prompt mean halved and doubled; the spread shows how much the assumption matters.
* Arrivals: Poisson at the row's rate, seed 0 (the client's own draw is not published); `inf` = all at t=0.
  A fixed-concurrency row (`max_concurrency` column, or `--max-concurrency N` in its flags or client note) runs
  as N closed-loop clients (`traffic.kind: closed_loop`, no think time): each sends its next request when its
  previous one ends, as the benchmark clients' semaphore does. With a finite rate too, the client also paces
  sends by its Poisson schedule; the closed loop does not (said in the row's assumptions).
* SGLang 0.3.0 limits: chunked prefill of 8,192 tokens, up to 2,048 running requests, 0.88 of memory
  (assumptions: that version's defaults as we read them for one A100-80GB; not stated by the source).
* Engines: each row runs the `conf/engine` preset of its engine and version (`engine_preset`), with the flags it
  publishes (`--num-scheduler-steps`); vLLM 0.6.3 streams multi-step outputs per step.
* ITL is the gap between consecutive deliveries of tokens (one per multi-step group under vLLM 0.6.0), as the
  benchmark clients count chunks.
"""
from __future__ import annotations

import csv
import re
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from inferplan.errors import InputError, exit_on_input_error
from scenarios.workload import Workload
from sim.compose import compose_config
from sim.config import load_run_config
from sim.simulate import simulate
from sim.validate.deployment import derived_model_yaml, model_for_id

REPO = Path(__file__).resolve().parents[2]
CSV_PATH = Path(__file__).resolve().parent / "data" / "published-serving-benchmarks-a100.csv"  # shipped copy (README)
OUTPUT_MEAN_TOKENS = 194.3   # A09: 4281.51 / 22.03; A10: 4132.37 / 21.27
PROMPT_MEAN_TOKENS = 215.0   # assumption (see the module docstring)
# Published column -> (simulated figure, unit scale to the published unit).
METRICS = {"req_per_s": ("requests_per_s", 1.0), "output_tok_per_s": ("output_tokens_per_s", 1.0),
           "total_tok_per_s": ("total_tokens_per_s", 1.0), "ttft_mean_ms": ("ttft_mean_s", 1e3),
           "ttft_median_ms": ("ttft_p50_s", 1e3), "ttft_p99_ms": ("ttft_p99_s", 1e3),
           "tpot_mean_ms": ("tpot_mean_s", 1e3), "tpot_median_ms": ("tpot_p50_s", 1e3),
           "tpot_p99_ms": ("tpot_p99_s", 1e3), "e2e_mean_ms": ("e2e_mean_s", 1e3), "e2e_median_ms": ("e2e_p50_s", 1e3),
           "itl_mean_ms": ("itl_mean_s", 1e3), "itl_median_ms": ("itl_p50_s", 1e3)}


def engine_preset(row: dict) -> str:
    """The conf/engine preset of a row's engine and version."""
    engine, version = row["engine"].strip().lower(), row["engine_version"].strip()
    if engine == "vllm":
        major = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
        return "vllm_v1" if major >= (0, 8) or "V1" in row.get("flags", "") else "vllm_v0"
    if engine == "sglang":
        major = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
        return "sglang_v04" if major >= (0, 4) else "sglang"  # (the overlap scheduler is on from 0.4.0)
    if engine.replace("-", "").replace(" ", "") in ("tensorrtllm", "trtllm"):
        return "trtllm"
    raise InputError(CSV_PATH, f"row {row['id']}: engine", f"no engine preset for {row['engine']!r}",
                     "use vLLM, SGLang or TensorRT-LLM (conf/engine/)")


def read_rows(path: Path = CSV_PATH) -> list[dict]:
    if not path.is_file():
        raise InputError(path, "path", "the published-results table is missing",
                         f"give csv=<a table in the columns of {CSV_PATH.name}> (the shipped copy is {CSV_PATH})")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        raise InputError(path, "rows", "no rows", "give the published-results table")
    return rows


def _filter_sharegpt(prompt: np.ndarray, output: np.ndarray) -> np.ndarray:
    return (prompt >= 4) & (output >= 4) & (prompt <= 1024) & (prompt + output <= 2048)


def _lognormal_lengths(rng, n: int, prompt_median: float, output_median: float) -> tuple[np.ndarray, np.ndarray]:
    prompts, outputs = [], []
    while sum(len(p) for p in prompts) < n:
        p = np.round(rng.lognormal(math.log(prompt_median), 1.0, 4 * n))
        o = np.round(rng.lognormal(math.log(output_median), 1.0, 4 * n))
        keep = _filter_sharegpt(p, o)
        prompts.append(p[keep])
        outputs.append(o[keep])
    return np.concatenate(prompts)[:n].astype(np.int64), np.concatenate(outputs)[:n].astype(np.int64)


def sharegpt_standin(n: int, seed: int = 0, prompt_mean: float = PROMPT_MEAN_TOKENS,
                     output_mean: float = OUTPUT_MEAN_TOKENS) -> tuple[np.ndarray, np.ndarray]:
    """`n` (prompt, output) lengths [n]: filtered lognormals whose filtered means are the targets (medians found
    by fixed-point iteration on a 20,000-draw sample)."""
    pm, om = prompt_mean, output_mean
    for _ in range(30):
        p, o = _lognormal_lengths(np.random.default_rng(12345), 20000, pm, om)
        pm *= prompt_mean / p.mean()
        om *= output_mean / o.mean()
    return _lognormal_lengths(np.random.default_rng(seed), n, pm, om)


@dataclass
class Setup:
    """One row as the simulator runs it."""

    row: dict
    overrides: list[str]
    prompt: np.ndarray
    output: np.ndarray
    arrival_s: np.ndarray
    basis: str                                  # system | per_request
    clients: int | None = None                  # fixed concurrency: closed-loop clients (None: open loop)
    assumptions: list[str] = field(default_factory=list)


def _num(row: dict, key: str) -> float | None:
    v = (row.get(key) or "").strip()
    if not v:
        return None
    return math.inf if v == "inf" else float(v)


def concurrency(row: dict) -> int | None:
    """The row's fixed client concurrency: its `max_concurrency` column, else `--max-concurrency N` in its flags or
    notes (None: open loop)."""
    v = _num(row, "max_concurrency")
    if v is None:
        found = re.search(r"--max-concurrency[ =](\d+)", f"{row.get('flags') or ''} {row.get('notes') or ''}")
        v = float(found.group(1)) if found else None
    if v is None or math.isinf(v):
        return None
    if v < 1 or v != int(v):
        raise InputError(CSV_PATH, f"row {row['id']}: max_concurrency", f"{v:g} is not a whole number >= 1",
                         "give the client's --max-concurrency")
    return int(v)


def _is_sharegpt(row: dict) -> bool:
    return row["input_len"].strip() == "ShareGPT"


def _notes(row: dict) -> dict:
    out = {}
    for part in (row.get("notes") or "").split(";"):
        k, sep, v = part.strip().partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def build_setup(row: dict, out_dir: Path, prompt_scale: float = 1.0) -> Setup:
    """The row's deployment, limits and workload as overrides and columns; assumptions listed."""
    model = model_for_id(row["model"])
    if model is None:
        raise InputError(CSV_PATH, f"row {row['id']}: model", f"no conf/model yaml for {row['model']!r}",
                         "add the model's yaml with its hf_id")
    tp = int(row["tp"])
    flags, engine = row["flags"], row["engine"]
    ov = ["scenario=smoke", "metrics.progress=false", "scenario.pools.main.hardware=a100_80gb",
          "scenario.pools.main.instances=1", f"++scenario.pools.main.tp={tp}", "++scenario.drain_timeout_s=3600"]
    notes = []
    preset = engine_preset(row)
    if engine == "vLLM":
        mml = 4096 if "--max_model_len 4096" in flags else 32768 if "max_model_len=32768" in flags else None
        if mml is None:
            raise InputError(CSV_PATH, f"row {row['id']}: flags", "no max_model_len", "state it in flags")
        steps = re.search(r"--num-scheduler-steps[ =](\d+)", flags)
        ov += [f"scenario.pools.main.model={derived_model_yaml(model, mml, out_dir)}", f"engine={preset}"]
        if steps:
            ov.append(f"engine.num_scheduler_steps={int(steps.group(1))}")
        if row["engine_version"].startswith("0.6.3"):
            ov.append("engine.stream_each_step=true")  # multi_step_stream_outputs True from 0.6.3
        notes.append(f"vLLM {row['engine_version']}: engine preset {preset} (conf/engine/{preset}.yaml)"
                     + (f", num_scheduler_steps {steps.group(1)} from the flags" if steps else ""))
    else:
        ov += [f"scenario.pools.main.model={model}", f"engine={preset}"]
        notes.append(f"SGLang {row['engine_version']}: engine preset {preset} (conf/engine/{preset}.yaml)")
    n = int(float(row["num_prompts"]))
    if _is_sharegpt(row):
        prompt, output = sharegpt_standin(n, seed=0, prompt_mean=PROMPT_MEAN_TOKENS * prompt_scale)
        notes.append(f"ShareGPT stand-in lengths (prompt mean {PROMPT_MEAN_TOKENS * prompt_scale:.0f}, output mean "
                     f"{OUTPUT_MEAN_TOKENS}; see module docstring)")
    else:
        prompt = np.full(n, int(float(row["input_len"])), dtype=np.int64)
        output = np.full(n, int(float(row["output_len"])), dtype=np.int64)
    rate = _num(row, "request_rate")
    clients = concurrency(row)
    if clients is not None:
        arrival = np.zeros(n)
        notes.append(f"fixed concurrency: {clients} closed-loop clients, no think time"
                     + (f" (the client's Poisson pacing at {rate:g} req/s is not modelled)"
                        if rate is not None and not math.isinf(rate) else ""))
    elif rate is None or math.isinf(rate):
        arrival = np.zeros(n)
    else:
        rng = np.random.default_rng(0)
        arrival = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, n - 1))])
        notes.append(f"Poisson arrivals at {rate:g} req/s, seed 0")
    basis = _notes(row).get("basis", "system")
    return Setup(row, ov, prompt, output, arrival, basis, clients=clients, assumptions=notes)


def simulate_setup(setup: Setup):
    """The row's simulation (a `SimResult`): open loop at its arrivals, or its closed-loop clients."""
    run = load_run_config(compose_config(setup.overrides))
    meta = {"closed_loop": {"clients": setup.clients, "think_time_s": 0.0}} if setup.clients is not None else None
    return simulate(run, Workload.from_columns(setup.arrival_s, setup.prompt, setup.output, source="published",
                                               metadata=meta))


def simulated_figures(setup: Setup) -> dict[str, float]:
    res = simulate_setup(setup)
    c = res.requests
    done = c["status"] == "completed"
    span = float(np.max(c["finish_s"][done]) - np.min(c["arrival_s"][done])) if done.any() else math.nan
    out_tok, in_tok = float(c["output_tokens"][done].sum()), float(c["prompt_tokens"][done].sum())
    fig = {"completed": int(done.sum()), "requests": len(done)}
    if setup.basis == "per_request":
        fig["output_tokens_per_s"] = float(np.mean(c["output_tokens"][done] / c["e2e_s"][done]))
    else:
        fig.update({"requests_per_s": done.sum() / span, "output_tokens_per_s": out_tok / span,
                    "total_tokens_per_s": (in_tok + out_tok) / span})
    itl = res.summary["latency_s"]["itl"]
    if itl["mean"] == itl["mean"]:
        fig["itl_mean_s"], fig["itl_p50_s"] = itl["mean"], itl["p50"]
    for m in ("ttft", "tpot", "e2e"):
        v = c[f"{m}_s"][done]
        v = v[np.isfinite(v)]
        if v.size:
            fig[f"{m}_mean_s"], fig[f"{m}_p50_s"], fig[f"{m}_p99_s"] = float(v.mean()), float(np.median(v)), float(np.percentile(v, 99))
    return fig


def compare_row(row: dict, out_dir: Path) -> dict:
    setup = build_setup(row, out_dir)
    sim = simulated_figures(setup)
    spread = {}
    if _is_sharegpt(row):
        spread = {s: simulated_figures(build_setup(row, out_dir, s)) for s in (0.5, 2.0)}
    published = {k: _num(row, k) for k in METRICS}
    published.update({k: float(v) for k, v in _notes(row).items() if k in METRICS})
    figures = {}
    for key, value in published.items():
        if value is None:
            continue
        sim_key, scale = METRICS[key]
        s = sim.get(sim_key)
        if s is None:
            continue
        s *= scale
        item = {"published": value, "simulated": s, "error_pct": 100.0 * (s - value) / value}
        if spread:
            alt = [spread[k].get(sim_key) for k in (0.5, 2.0)]
            item["simulated_prompt_mean_x0.5_x2"] = [None if a is None else a * scale for a in alt]
        figures[key] = item
    return {"id": row["id"], "engine": f"{row['engine']} {row['engine_version']}", "model": row["model"],
            "tp": int(row["tp"]), "dataset": "ShareGPT" if _is_sharegpt(row) else row["dataset"], "request_rate": row["request_rate"],
            "num_prompts": int(float(row["num_prompts"])), "basis": setup.basis, "figures": figures,
            "completed": f"{sim['completed']}/{sim['requests']}", "assumptions": setup.assumptions,
            "not_compared": [k for k in METRICS if (_num(row, k) is not None or k in _notes(row))
                             and k not in figures]}


FAMILIES = {"throughput": ("req_per_s", "output_tok_per_s", "total_tok_per_s"),
            "tpot": ("tpot_mean_ms", "tpot_median_ms", "tpot_p99_ms"),
            "ttft": ("ttft_mean_ms", "ttft_median_ms", "ttft_p99_ms"),
            "itl": ("itl_mean_ms", "itl_median_ms"), "e2e": ("e2e_mean_ms", "e2e_median_ms")}


def median_abs_errors(results: list[dict]) -> dict[str, float]:
    """Per metric family, the median over rows of each row's mean |error| over the family's published figures."""
    out = {}
    for fam, keys in FAMILIES.items():
        per_row = [float(np.mean([abs(r["figures"][k]["error_pct"]) for k in keys if k in r["figures"]]))
                   for r in results if any(k in r["figures"] for k in keys)]
        if per_row:
            out[fam] = float(np.median(per_row))
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = dict(a.split("=", 1) for a in argv if "=" in a)
    with exit_on_input_error():
        path = Path(args["csv"]) if "csv" in args else CSV_PATH
        rows = read_rows(path)
        wanted = set(args["rows"].split(",")) if "rows" in args else None
        out = Path(args.get("out") or Path("runs") / "validate" / "published" / time.strftime("%Y-%m-%d_%H-%M-%S"))
        out.mkdir(parents=True, exist_ok=True)
        results = [compare_row(r, out) for r in rows if wanted is None or r["id"] in wanted]
    for r in results:
        print(f"{r['id']} {r['engine']} {r['model']} tp{r['tp']} {r['dataset']} rate={r['request_rate']} "
              f"n={r['num_prompts']} ({r['completed']} completed in the simulation)")
        for key, f in r["figures"].items():
            extra = ""
            if "simulated_prompt_mean_x0.5_x2" in f:
                lo, hi = f["simulated_prompt_mean_x0.5_x2"]
                extra = f"   [prompt mean x0.5: {lo:,.2f}, x2: {hi:,.2f}]"
            print(f"   {key:18s} published {f['published']:>10,.2f}  simulated {f['simulated']:>10,.2f}  "
                  f"error {f['error_pct']:+7.1f}%{extra}")
    medians = median_abs_errors(results)
    for fam, v in medians.items():
        print(f"median |error| {fam}: {v:.1f}%")
    doc = {"source": str(path), "median_abs_error_pct": medians, "note": "simulated as documented with configured defaults; nothing fitted",
           "rows": results}
    (out / "published.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(f"results: {out / 'published.json'}")


if __name__ == "__main__":
    main()
