"""SGLang `python -m sglang.bench_serving --output-file` JSON Lines (S25 / S25+ of
`shared/formats/serving-benchmark-logs.md` §2).

Each run appends one line; the per-request lists (`input_lens`, `output_lens`, `ttfts`, `itls`, `errors`) are
there only with `--output-details`. No SGLang version stores send times, so `arrival_s` is None and the replay
reconstructs arrivals from `request_rate` (Poisson) and a seed. E2E is `ttft + sum(itls)`: the native backend
splits each chunk gap evenly over its tokens, so the sum is the time of the last chunk either way.
S25+ lines may carry `server_info`; its `tp_size`, `max_running_requests`, `chunked_prefill_size`,
`context_length` and `model_path` become deployment hints.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from inferplan.errors import InputError
from sim.validate.formats.checks import (consistency_notes, error_flags, gap_lists, json_objects, number_list,
                                         optional_number, pick_run, read_text)
from sim.validate.measured import MeasuredRun, finish

WHAT = "JSON Lines written by `python -m sglang.bench_serving --output-file ... --output-details`"
LISTS = ("input_lens", "output_lens", "ttfts", "itls")
SERVER_INFO_KEYS = {"tp_size": "tp", "max_running_requests": "max_num_seqs", "chunked_prefill_size": "chunked_prefill_size",
                    "context_length": "max_model_len", "model_path": "model_id"}


def looks_like(obj: dict) -> bool:
    """Shape test of the formats doc §8: lines with `total_output_tokens_retokenized`."""
    return "total_output_tokens_retokenized" in obj


def read(path: Path, run: int | None = None) -> MeasuredRun:
    objs = json_objects(path, read_text(path, WHAT))
    obj, notes = pick_run(path, objs, run, lambda o: all(k in o for k in LISTS))
    if not looks_like(obj):
        raise InputError(path, "total_output_tokens_retokenized", "missing: not an SGLang bench_serving result",
                         f"give the {WHAT}")
    version = "S25+" if any(k in obj for k in ("server_info", "tag", "total_throughput")) else "S25"
    if not any(k in obj for k in LISTS):
        raise InputError(path, "input_lens", "per-request lists missing (bench_serving writes them only with "
                         "--output-details; S24 never does)", "rerun bench_serving with --output-file ... --output-details")
    n = len(obj["input_lens"]) if isinstance(obj.get("input_lens"), list) else None
    prompt = number_list(path, obj, "input_lens", integer=True, length=n)
    n = len(prompt)
    output = number_list(path, obj, "output_lens", integer=True, length=n)
    ttft = number_list(path, obj, "ttfts", length=n)
    itls = gap_lists(path, obj, "itls", n)
    ok = ~error_flags(path, obj, "errors", n)
    e2e = ttft + np.array([g.sum() for g in itls])
    notes.append("E2E = ttft + sum(itls) (bench_serving stores no per-request latency)")
    deployment: dict = {}
    info = obj.get("server_info")
    if isinstance(info, dict):
        deployment = {ours: info[theirs] for theirs, ours in SERVER_INFO_KEYS.items() if info.get(theirs) not in (None, "")}
    rate = obj.get("request_rate")
    client = {"request_rate": None if isinstance(rate, str) and rate != "inf" else optional_number(obj, "request_rate"),
              "burstiness": 1.0, "max_concurrency": optional_number(obj, "max_concurrency"), "seed": None,
              "num_prompts": float(n), "rescaled_schedule": False}
    if isinstance(rate, str) and rate == "trace":
        notes.append("request_rate is 'trace' (Mooncake timestamps): the log cannot recover them; give a rate")
    aggregates = {"duration_s": optional_number(obj, "duration"), "completed": optional_number(obj, "completed"),
                  "requests_per_s": optional_number(obj, "request_throughput"),
                  "output_tokens_per_s": optional_number(obj, "output_throughput")}
    notes += consistency_notes(obj, ttft, e2e, output, ok)
    return finish(path, "sglang", version, index=np.arange(n), arrival_s=None, prompt=prompt, output=output,
                  ttft=ttft, e2e=e2e, sent=n, ok=ok, deployment=deployment, client=client, aggregates=aggregates,
                  notes=notes, itls=itls)
