"""vLLM `benchmark_serving.py` / `vllm bench serve` `--save-result` JSON (versions V24, V25a, V25b, V26 of
`shared/formats/serving-benchmark-logs.md` §1 and §3).

Per request: `input_lens`, `output_lens`, `ttfts` (s), `itls` (per-chunk gaps, s), `errors`; V26 adds
`start_times` (perf_counter send times), `latencies` (E2E, s) and `queue_times`. Quirks handled:
* V24 completions: `itls[i][0]` repeats `ttfts[i]` — detected across requests and dropped.
* V25b+: the lists exist only with `--save-detailed` — a one-line error says so.
* before V26 there are no send times: `arrival_s` is None and the replay reconstructs it (sim/validate/arrivals.py).
* E2E: V26 `latencies`; otherwise `ttft + sum(itls)` (for chat backends and V24 this ends at the last content
  chunk, a few ms before the usage/[DONE] message the client timed).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from inferplan.errors import InputError
from sim.validate.formats.checks import (consistency_notes, error_flags, gap_lists, json_objects, number_list,
                                         optional_number, pick_run, read_text)
from sim.validate.measured import MeasuredRun, finish

WHAT = "JSON written by vLLM `benchmark_serving.py --save-result` (or `vllm bench serve --save-result`)"
LISTS = ("input_lens", "output_lens", "ttfts", "itls")
# `--metadata KEY=VALUE` keys this reader understands as deployment hints (docs/validation.md).
DEPLOYMENT_KEYS = ("hardware", "model", "tp", "instances", "max_num_seqs", "max_num_batched_tokens",
                   "enable_chunked_prefill", "max_model_len")


def looks_like(obj: dict) -> bool:
    """Shape test of the formats doc §8: an object with `date`, `backend`, `model_id`, `duration`."""
    return all(k in obj for k in ("date", "backend", "model_id", "duration"))


def version_of(obj: dict) -> str:
    if any(k in obj for k in ("start_times", "latencies", "queue_times", "rtfx")):
        return "V26"
    if "endpoint_type" in obj or "request_goodput" in obj or "failed" in obj:
        return "V25b"
    if "burstiness" in obj or "max_concurrency" in obj or "request_goodput:" in obj:
        return "V25a"
    return "V24"


def read(path: Path, run: int | None = None) -> MeasuredRun:
    objs = json_objects(path, read_text(path, WHAT))
    obj, notes = pick_run(path, objs, run, lambda o: all(k in o for k in LISTS))
    if not looks_like(obj):
        missing = [k for k in ("date", "backend", "model_id", "duration") if k not in obj][0]
        raise InputError(path, missing, "missing: not a vLLM benchmark result", f"give the {WHAT}")
    version = version_of(obj)
    if not any(k in obj for k in LISTS):
        raise InputError(path, "input_lens", f"per-request lists missing ({version} writes them only with "
                         "--save-detailed)", "rerun the benchmark with --save-result --save-detailed")
    n = len(obj["input_lens"]) if isinstance(obj.get("input_lens"), list) else None
    prompt = number_list(path, obj, "input_lens", integer=True, length=n)
    n = len(prompt)
    output = number_list(path, obj, "output_lens", integer=True, length=n)
    ttft = number_list(path, obj, "ttfts", length=n)
    itls = gap_lists(path, obj, "itls", n)
    failed = error_flags(path, obj, "errors", n)
    ok = ~failed
    with_gaps = [i for i in np.flatnonzero(ok) if itls[i].size]
    if with_gaps and all(abs(itls[i][0] - ttft[i]) < 1e-3 for i in with_gaps):
        dropped = set(with_gaps)
        itls = [g[1:] if i in dropped else g for i, g in enumerate(itls)]
        notes.append("itls[i][0] equals ttfts[i] for every request (V24 completions quirk): first gap dropped")
    e2e = ttft + np.array([g.sum() for g in itls])
    if "latencies" in obj:
        lat = number_list(path, obj, "latencies", length=n)
        bad = np.flatnonzero(ok & (lat + 1e-6 < ttft))
        if bad.size:
            i = int(bad[0])
            raise InputError(path, f"latencies[{i}]", f"{lat[i]} s is shorter than ttfts[{i}] = {ttft[i]} s",
                             "give the file as the client wrote it")
        e2e = lat
        notes.append("E2E from `latencies` (V26)")
    else:
        notes.append("E2E = ttft + sum(itls): the log stores no per-request latency before V26")
    arrival = None
    if "start_times" in obj:
        arrival = number_list(path, obj, "start_times", length=n, non_negative=False)
        notes.append("arrivals = start_times (send time after the client's --max-concurrency semaphore, which is "
                     "where TTFT starts)")
    meta = {k: obj[k] for k in DEPLOYMENT_KEYS if k in obj and obj[k] not in (None, "")}
    deployment = {"model_id": obj.get("model_id"), **meta}
    rate = obj.get("request_rate")
    client = {"request_rate": optional_number(obj, "request_rate") if rate is not None else None,
              "burstiness": optional_number(obj, "burstiness") or 1.0,
              "max_concurrency": optional_number(obj, "max_concurrency"),
              "num_prompts": optional_number(obj, "num_prompts"),
              "seed": optional_number(obj, "seed"),
              "rescaled_schedule": version in ("V25b", "V26")}
    aggregates = {"duration_s": optional_number(obj, "duration"), "completed": optional_number(obj, "completed"),
                  "requests_per_s": optional_number(obj, "request_throughput"),
                  "output_tokens_per_s": optional_number(obj, "output_throughput")}
    notes += consistency_notes(obj, ttft, e2e, output, ok)
    return finish(path, "vllm", version, index=np.arange(n), arrival_s=arrival, prompt=prompt, output=output,
                  ttft=ttft, e2e=e2e, sent=n, ok=ok, deployment=deployment, client=client, aggregates=aggregates,
                  notes=notes, itls=itls)

