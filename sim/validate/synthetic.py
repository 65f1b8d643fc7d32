"""Measured-looking logs produced by the simulator itself, written in every supported format.

Used by the parameter-recovery tests and to build the shipped samples (`sim/validate/samples/`, all labelled
SYNTHETIC): simulate a workload under known `ResidualParams`, add multiplicative measurement noise to TTFT and to
the decode time, and write the result as a vLLM `--save-result` JSON, an SGLang `bench_serving` line, or the
generic table. The writers follow `shared/formats/serving-benchmark-logs.md` independently of the readers.

    python -m sim.validate.synthetic            # rebuilds sim/validate/samples/
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scenarios.workload import Workload
from sim.compose import compose_config
from sim.config import RunConfig, load_run_config
from sim.simulate import simulate
from sim.validate.replay import ResidualParams

SAMPLES_DIR = Path(__file__).resolve().parent / "samples"
LABEL = "SYNTHETIC: produced by inferplan's simulator (sim/validate/synthetic.py), not measured on hardware"


@dataclass
class SyntheticLog:
    """Per-request 'measurements' in send order [R], plus the truth they were produced under."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    ttft_s: np.ndarray
    e2e_s: np.ndarray
    truth: ResidualParams
    request_rate: float
    seed: int


def truth_run(overrides: list[str], truth: ResidualParams) -> RunConfig:
    base = load_run_config(compose_config(["metrics.progress=false", *overrides]))
    return truth.apply(base)


def make_log(run: RunConfig, n: int, rate_per_s: float, seed: int, noise_sigma: float = 0.03,
             prompt_median: int = 600, output_median: int = 48) -> SyntheticLog:
    """Poisson arrivals with lognormal lengths, simulated on `run`, with lognormal noise of `noise_sigma` on TTFT
    and on the decode time (E2E - TTFT) of each request."""
    rng = np.random.default_rng(seed)
    arrival = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate_per_s, n - 1))])
    prompt = np.clip(np.round(rng.lognormal(np.log(prompt_median), 0.8, n)), 8, 4000).astype(np.int64)
    output = np.clip(np.round(rng.lognormal(np.log(output_median), 0.6, n)), 2, 400).astype(np.int64)
    res = simulate(run, Workload.from_columns(arrival, prompt, output))
    cols = res.requests
    if not np.all(cols["status"] == "completed"):
        raise RuntimeError("a synthetic request did not complete; lower the rate")
    ttft = cols["ttft_s"] * rng.lognormal(0.0, noise_sigma, n)
    decode = (cols["e2e_s"] - cols["ttft_s"]) * rng.lognormal(0.0, noise_sigma, n)
    return SyntheticLog(arrival, prompt, output, ttft, ttft + decode, ResidualParams.from_run(run), rate_per_s, seed)


def _itls(log: SyntheticLog, i: int) -> list[float]:
    """Per-token gaps summing to the decode time (one token per chunk)."""
    k = int(log.output_tokens[i]) - 1
    return [round(float((log.e2e_s[i] - log.ttft_s[i]) / k), 6)] * k if k > 0 else []


def write_vllm(log: SyntheticLog, path: Path, *, version: str = "V26", metadata: dict | None = None,
               failed_after: int | None = None, model_id: str = "meta-llama/Meta-Llama-3-8B-Instruct") -> Path:
    """A vLLM `--save-result --save-detailed` JSON. V26 carries start_times/latencies; V25a has no send times;
    V24 also repeats the TTFT as the first ITL entry (the completions quirk). `failed_after`: insert one failed
    request at that position (errors[i] non-empty, zeros elsewhere)."""
    n = len(log.arrival_s)
    rows = [dict(inp=int(log.prompt_tokens[i]), out=int(log.output_tokens[i]), ttft=float(log.ttft_s[i]),
                 itl=_itls(log, i), lat=float(log.e2e_s[i]), start=80312.0 + float(log.arrival_s[i]), err="")
            for i in range(n)]
    if failed_after is not None:
        rows.insert(failed_after, dict(inp=321, out=0, ttft=0.0, itl=[], lat=0.0,
                                       start=rows[failed_after - 1]["start"] + 1e-3, err="Bad Request"))
    if version == "V24":
        for r in rows:
            if r["itl"]:
                r["itl"] = [r["ttft"], *r["itl"]]
    ok = [r for r in rows if not r["err"]]
    duration = max(log.arrival_s + log.e2e_s)
    tpots = [(r["lat"] - r["ttft"]) / (r["out"] - 1) for r in ok if r["out"] > 1]
    obj = {"date": "20260105-101530", "backend": "vllm", "model_id": model_id, "tokenizer_id": model_id,
           "num_prompts": len(rows), "request_rate": log.request_rate, "duration": float(duration),
           "completed": len(ok), "total_input_tokens": sum(r["inp"] for r in ok),
           "total_output_tokens": sum(r["out"] for r in ok), "request_throughput": len(ok) / duration,
           "output_throughput": sum(r["out"] for r in ok) / duration,
           "mean_ttft_ms": 1e3 * float(np.mean([r["ttft"] for r in ok])),
           "mean_tpot_ms": 1e3 * float(np.mean(tpots)), "synthetic": LABEL, **(metadata or {})}
    if version != "V24":
        obj.update({"burstiness": 1.0, "max_concurrency": None})
    if version in ("V25b", "V26"):
        obj.update({"endpoint_type": "vllm", "label": None, "failed": len(rows) - len(ok), "request_goodput": None})
    obj.update({"input_lens": [r["inp"] for r in rows], "output_lens": [r["out"] for r in rows],
                "ttfts": [r["ttft"] for r in rows], "itls": [r["itl"] for r in rows],
                "generated_texts": ["" for _ in rows], "errors": [r["err"] for r in rows]})
    if version == "V26":
        obj.update({"start_times": [r["start"] for r in rows], "latencies": [r["lat"] for r in rows],
                    "queue_times": [0.0001 for _ in rows]})
    path.write_text(json.dumps(obj) + "\n")
    return path


def write_sglang(log: SyntheticLog, path: Path, *, server_info: dict | None = None, failed_after: int | None = None) -> Path:
    """One SGLang `bench_serving --output-details` line (S25 layout; S25+ when `server_info` is given)."""
    n = len(log.arrival_s)
    rows = [dict(inp=int(log.prompt_tokens[i]), out=int(log.output_tokens[i]), ttft=float(log.ttft_s[i]),
                 itl=_itls(log, i), err="") for i in range(n)]
    if failed_after is not None:
        rows.insert(failed_after, dict(inp=321, out=0, ttft=0.0, itl=[], err="Internal Server Error"))
    ok = [r for r in rows if not r["err"]]
    duration = float(max(log.arrival_s + log.e2e_s))
    tpots = [sum(r["itl"]) / (r["out"] - 1) for r in ok if r["out"] > 1]
    obj = {"backend": "sglang", "dataset_name": "random", "request_rate": log.request_rate, "max_concurrency": None,
           "sharegpt_output_len": None, "random_input_len": 600, "random_output_len": 48, "random_range_ratio": 0.0,
           "duration": duration, "completed": len(ok), "total_input_tokens": sum(r["inp"] for r in ok),
           "total_output_tokens": sum(r["out"] for r in ok),
           "total_output_tokens_retokenized": sum(r["out"] for r in ok),
           "request_throughput": len(ok) / duration, "output_throughput": sum(r["out"] for r in ok) / duration,
           "mean_ttft_ms": 1e3 * float(np.mean([r["ttft"] for r in ok])), "mean_tpot_ms": 1e3 * float(np.mean(tpots)),
           "accept_length": None, "synthetic": LABEL}
    if server_info is not None:
        obj.update({"tag": None, "server_info": server_info})
    obj.update({"input_lens": [r["inp"] for r in rows], "output_lens": [r["out"] for r in rows],
                "ttfts": [r["ttft"] for r in rows], "itls": [r["itl"] for r in rows],
                "generated_texts": ["" for _ in rows], "errors": [r["err"] for r in rows]})
    path.write_text(json.dumps(obj) + "\n")
    return path


def write_table(log: SyntheticLog, path: Path) -> Path:
    """The generic table (CSV, or Parquet by suffix); TPOT is left for the reader to derive."""
    cols = {"arrival_s": np.round(log.arrival_s, 6), "prompt_tokens": log.prompt_tokens,
            "output_tokens": log.output_tokens, "ttft_s": np.round(log.ttft_s, 6), "e2e_s": np.round(log.e2e_s, 6)}
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table(cols), path)
        return path
    lines = [",".join(cols)] + [",".join(str(cols[k][i]) for k in cols) for i in range(len(log.arrival_s))]
    path.write_text("\n".join(lines) + "\n")
    return path


# The shipped samples: Llama-3-8B on one A100-80GB, continuous batching, under these known residuals.
SAMPLE_TRUTH = ResidualParams(step_overhead_s=4e-3, frontend_overhead_s=0.015, scale={"gemm": 0.8, "attention": 0.9})
SAMPLE_OVERRIDES = ["scenario=smoke", "scenario.pools.main.hardware=a100_80gb", "scenario.pools.main.instances=1"]
SAMPLE_METADATA = {"hardware": "a100_80gb", "tp": "1", "instances": "1", "max_num_seqs": "256",
                   "max_num_batched_tokens": "8192", "enable_chunked_prefill": "false"}


def write_samples(out: Path = SAMPLES_DIR, n: int = 200, rate_per_s: float = 3.0, seed: int = 7) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    log = make_log(truth_run(SAMPLE_OVERRIDES, SAMPLE_TRUTH), n, rate_per_s, seed)
    return [write_vllm(log, out / "synthetic_vllm_v26.json", metadata=SAMPLE_METADATA, failed_after=n // 2),
            write_sglang(log, out / "synthetic_sglang_s25.jsonl", failed_after=n // 2),
            write_table(log, out / "synthetic_generic.csv")]


if __name__ == "__main__":
    for p in write_samples(Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLES_DIR):
        print(p)
