"""The front-end time's terms as the fits and the matrix name them (the `frontend_*` keys of an engine preset,
sim/core/instance/frontend.py), and which rows a fit leaves out."""
from __future__ import annotations

KEYS = ("frontend_per_request_s", "frontend_per_prompt_token_s", "frontend_per_stream_s", "frontend_per_prefill_s",
        "frontend_per_prefill_stream_s", "frontend_per_step", "frontend_per_step_token")
ZERO = {k: 0.0 for k in KEYS}

# A row whose simulated decode misses the measured TPOT by more than this (%) is not fitted: the front-end terms
# explain TTFT beyond kernels that run as the row records them, and a decode step off by more than half says the
# run was not what its columns record (the H100 vLLM gpt-oss-120b 512-client rows had ~100 requests in flight; the
# H100 TensorRT-LLM gpt-oss-120b Dynamo rows' TPOT is 3-4x the same engine's on H200: docs/validation.md). Those
# rows stay in the matrix and its scores; only the fits leave them out.
DECODE_OFF_PCT = 50.0


def decode_is_off(rec: dict) -> bool:
    """Whether a record's simulated TPOT median misses the measured one by more than `DECODE_OFF_PCT` (no TPOT
    error recorded: not off)."""
    return abs(float(rec.get("tpot_error_pct") or 0.0)) > DECODE_OFF_PCT
