"""The normalized measured run every reader produces: one row per successful request, in seconds and tokens.

Readers (`sim/validate/formats/`) convert each client's own units and definitions once; everything downstream
(replay, compare, fit) reads only `MeasuredRun`. Definitions, whatever the client:

* `ttft_s` — client send to first streamed token (includes network, front end, queueing and prefill).
* `e2e_s` — client send to the last token.
* `tpot_s` — `(e2e_s - ttft_s) / (output_tokens - 1)`, the first token excluded (vLLM/SGLang "TPOT"); NaN for
  one-token outputs. A table that carries its own `tpot_s` keeps it.
* `itl_gaps_s` — where the log has per-token times (vLLM/SGLang `itls`: the gap between consecutive streamed
  chunks), every gap of the kept requests, pooled; None otherwise.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from inferplan.errors import InputError


@dataclass(frozen=True)
class MeasuredRun:
    """Per-request measurements of one benchmark run, plus what the log says about its setup."""

    path: str
    format: str                  # reader key: vllm | sglang | table
    version: str                 # e.g. V26, V25b, S25, csv (see docs/validation.md)
    index: np.ndarray            # [R] int64, position of the request in the log (send order)
    arrival_s: np.ndarray | None  # [R] float64 send time, s from the first send; None when the log has none
    prompt_tokens: np.ndarray    # [R] int64
    output_tokens: np.ndarray    # [R] int64
    ttft_s: np.ndarray           # [R] float64
    tpot_s: np.ndarray           # [R] float64, NaN for one-token outputs
    e2e_s: np.ndarray            # [R] float64
    sent_requests: int           # requests in the log, failed and skipped ones included
    arrival_source: str = "log"  # log | reconstructed | none
    deployment: dict = field(default_factory=dict)  # hints for the replay: model_id, tp, max_num_seqs, ...
    client: dict = field(default_factory=dict)      # request_rate, burstiness, max_concurrency, seed, version
    aggregates: dict = field(default_factory=dict)  # the log's own run-level figures (duration_s, ...)
    skipped: dict = field(default_factory=dict)     # reason -> count of requests left out
    notes: tuple[str, ...] = ()                     # how the reader interpreted the file (quirks handled)
    itl_gaps_s: np.ndarray | None = None            # [G] pooled inter-token gaps of the kept requests (s)

    def __len__(self) -> int:
        return int(self.index.shape[0])

    def with_(self, **changes) -> "MeasuredRun":
        return dataclasses.replace(self, **changes)


def tpot_from(ttft_s: np.ndarray, e2e_s: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """TPOT excluding the first token, as vLLM and SGLang define it; NaN where there is one output token."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(output_tokens > 1, (e2e_s - ttft_s) / np.maximum(output_tokens - 1, 1), np.nan)


def finish(path: str, fmt: str, version: str, *, index, arrival_s, prompt, output, ttft, e2e, tpot=None,
           sent: int, ok, deployment: dict, client: dict, aggregates: dict, notes: list[str],
           skipped: dict | None = None, itls: list | None = None) -> MeasuredRun:
    """Drop failed and unsimulatable requests, count them, derive TPOT, and check the result is non-empty."""
    skipped = dict(skipped or {})
    ok = np.asarray(ok, dtype=bool)
    n_failed = int((~ok).sum())
    if n_failed:
        skipped["failed"] = skipped.get("failed", 0) + n_failed
    prompt, output = np.asarray(prompt, dtype=np.int64), np.asarray(output, dtype=np.int64)
    zero = ok & ((prompt < 1) | (output < 1))
    if zero.any():
        skipped["zero_length"] = int(zero.sum())
    keep = ok & ~zero
    if not keep.any():
        raise InputError(path, "requests", f"no successful request with prompt and output tokens >= 1 "
                         f"({sent} in the log, skipped: {skipped or 'none'})", "give a run with completed requests")
    ttft, e2e = np.asarray(ttft, dtype=np.float64)[keep], np.asarray(e2e, dtype=np.float64)[keep]
    prompt, output = prompt[keep], output[keep]
    derived = tpot_from(ttft, e2e, output)
    tpot = derived if tpot is None else np.where(np.isfinite(np.asarray(tpot, dtype=np.float64)[keep]),
                                                 np.asarray(tpot, dtype=np.float64)[keep], derived)
    arr = None
    if arrival_s is not None:
        arr = np.asarray(arrival_s, dtype=np.float64)
        arr = arr[keep] - arr[keep].min()
    gaps = None
    if itls is not None:
        kept = [np.asarray(itls[i], dtype=np.float64) for i in np.flatnonzero(keep)]
        gaps = np.concatenate(kept) if kept else np.zeros(0)
    return MeasuredRun(path=str(path), format=fmt, version=version, index=np.asarray(index, dtype=np.int64)[keep],
                       arrival_s=arr, prompt_tokens=prompt, output_tokens=output, ttft_s=ttft, tpot_s=tpot, e2e_s=e2e,
                       sent_requests=int(sent), arrival_source="log" if arr is not None else "none",
                       deployment=deployment, client=client, aggregates=aggregates, skipped=skipped, notes=tuple(notes),
                       itl_gaps_s=gaps)
