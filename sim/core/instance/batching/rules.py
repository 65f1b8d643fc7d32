"""The rules of the one scheduler (scheduler.py), each a setting of an engine preset (`conf/engine/`, whose yamls
cite their engines' sources), read once from its name into a constant, and the small functions that apply them.

* admission: `on_demand` admits a request when the blocks of its next chunk are free (vLLM; with a watermark of
  free blocks kept at admission, vLLM V0's); `reserve_max_output` only when the blocks of its whole prompt and
  maximum output fit beside what every running request may still need (TensorRT-LLM GUARANTEED_NO_EVICT: it
  never preempts); `new_token_ratio` (SGLang's PrefillAdder) admits a prompt when its tokens plus its remaining
  output (clipped at `NEW_TOKEN_CLIP`) fit in the free KV less, per running request, the ratio x its remaining
  output (clipped the same way), the ratio decaying per iteration from its initial value to its floor and reset on
  a retraction; a prompt admitted but not yet decoding keeps its whole clipped output reserved.
* preemption, when a running request cannot grow: `recompute` (the last admitted gives up its KV and re-prefills
  later: vLLM), `retract` (SGLang: the one with the most output tokens, ties to the shortest prompt, recomputed)
  or `swap` (vLLM V0 `preemption_mode=swap`: the last admitted's KV goes to host memory, its tokens kept).
* iteration mix: `mixed` (running requests first, then admissions into the budget left: vLLM V1, V0 with chunked
  prefill, TensorRT-LLM in-flight batching) or `prefill_priority` (an iteration that can admit prompts or continue
  a chunked one carries no decodes: vLLM V0 without chunked prefill, SGLang).
* overlap: which host work runs under the previous iteration's GPU time (sim/core/instance/batch.py OVERLAP_*).
"""
from __future__ import annotations

import bisect
from typing import Final

from sim.core.cost.base import BatchShape
from sim.core.instance.batch import OVERLAP_ALL, OVERLAP_NONE, OVERLAP_OUTPUT, _shape, known_tokens
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest

ON_DEMAND: Final = 0
RESERVE_MAX_OUTPUT: Final = 1
NEW_TOKEN_RATIO: Final = 2
ADMISSIONS: Final = {"on_demand": ON_DEMAND, "reserve_max_output": RESERVE_MAX_OUTPUT,
                     "new_token_ratio": NEW_TOKEN_RATIO}

RECOMPUTE: Final = 0
RETRACT: Final = 1
SWAP: Final = 2
PREEMPTIONS: Final = {"recompute": RECOMPUTE, "retract": RETRACT, "swap": SWAP}

MIXED: Final = 0
PREFILL_PRIORITY: Final = 1
ITERATIONS: Final = {"mixed": MIXED, "prefill_priority": PREFILL_PRIORITY}

OVERLAPS: Final = {"none": OVERLAP_NONE, "output": OVERLAP_OUTPUT, "all": OVERLAP_ALL}

# SGLang's SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION default: the most output tokens one request's reservation counts
# (managers/schedule_policy.py CLIP_MAX_NEW_TOKENS: L31 at 0.4.0, L39 at 0.5.1, L54 at 0.5.9).
NEW_TOKEN_CLIP: Final = 4096
RETRACT_DECODE_STEPS: Final = 20  # SGLang's retract_decode_steps: the survivors' ratio covers this many more steps


def rule(key: str, value: str, valid: dict[str, int]) -> int:
    """The constant a rule's name stands for (a ValueError naming the valid ones otherwise)."""
    if value not in valid:
        raise ValueError(f'"{key}" {value!r} is not one of {", ".join(valid)}')
    return valid[value]


# -- admission ---------------------------------------------------------------------------------------------------
def reserved_tokens(req: SimRequest, admitting: bool, admission: int, ratio: float) -> int:
    """Tokens of KV `req` is counted as needing: its whole prompt and maximum output (reserve_max_output); under
    new_token_ratio (SGLang, schedule_policy.py `add_one_req` and `_get_running_request_total_token_offset`) a prompt
    being admitted, or admitted and not yet decoding, its known tokens plus its remaining output clipped at
    `NEW_TOKEN_CLIP`, in full; a decoding request what it holds plus `ratio` x that clipped remaining output."""
    if admission == RESERVE_MAX_OUTPUT:
        return req.total_tokens
    left = min(req.output_tokens - req.num_output_tokens, NEW_TOKEN_CLIP)
    if admitting:
        return known_tokens(req) + left
    if req.num_output_tokens == 0:
        return req.prompt_tokens + left
    return req.num_computed_tokens + int(left * ratio)


def fits_reserved(req: SimRequest, running: list[SimRequest], kv: BlockManager, admission: int,
                  ratio: float) -> bool:
    """reserve_max_output / new_token_ratio: the reservation of `req` fits in the free blocks beside what the
    running requests' reservations still lack."""
    bs = kv.block_size_tokens
    need = 0
    for r in running:
        need += max(0, -(-reserved_tokens(r, False, admission, ratio) // bs) - kv.held(r))
    need += max(0, -(-reserved_tokens(req, True, admission, ratio) // bs) - kv.held(req))
    return need <= kv.free_blocks


def above_watermark(req: SimRequest, n: int, kv: BlockManager, watermark_blocks: int) -> bool:
    """vLLM V0: admitting `req`'s next `n` tokens leaves at least `watermark_blocks` blocks free."""
    need = kv._own_blocks_for(req, req.num_computed_tokens + n) - kv.held(req)
    return kv.free_blocks - need >= watermark_blocks


# -- preemption --------------------------------------------------------------------------------------------------
def retract_index(running: list[SimRequest]) -> int:
    """SGLang's victim: the running request with the most output tokens, ties to the shortest prompt (the first
    such in `running`)."""
    best = 0
    top = running[0]
    for j in range(1, len(running)):
        r = running[j]
        if (r.num_output_tokens > top.num_output_tokens
                or (r.num_output_tokens == top.num_output_tokens and r.prompt_tokens < top.prompt_tokens)):
            best, top = j, r
    return best


def retracted_ratio(running: list[SimRequest]) -> float:
    """SGLang's new_token_ratio after a retraction: what the survivors need for RETRACT_DECODE_STEPS more steps,
    as a share of their whole output (at most 1)."""
    done = 0
    total = 0
    for r in running:
        done += r.num_output_tokens
        total += r.output_tokens
    return min(1.0, (done + RETRACT_DECODE_STEPS * len(running)) / (total or 1))


# -- pricing shape -----------------------------------------------------------------------------------------------
def with_lagging(shape: BatchShape, lagging: list[SimRequest]) -> BatchShape:
    """Overlap `all`: the requests that finished in the last iteration decode once more (their tokens discarded),
    since the engine formed this iteration before it saw them finish."""
    ctx = 0
    for r in lagging:
        ctx += r.num_computed_tokens + 1
    n = len(lagging)
    return _shape((shape.prefill_seqs, shape.prefill_tokens, shape.prefill_q_ctx_sum, shape.prefill_q_sq_sum,
                   shape.prefill_kv_tokens, shape.decode_seqs + n, shape.decode_ctx_sum + ctx,
                   shape.sampled_seqs + n))


def graph_padded(shape: BatchShape, graph_sizes: list[int]) -> BatchShape:
    """A decode-only iteration of n sequences priced as the smallest captured CUDA graph size >= n (each padded
    sequence computes one token at context 1); above the largest captured size the engine runs eager, unpadded."""
    n = shape.decode_seqs
    j = bisect.bisect_left(graph_sizes, n)
    if j == len(graph_sizes) or graph_sizes[j] == n:
        return shape
    pad = graph_sizes[j] - n
    return _shape((0, 0, 0, 0, 0, n + pad, shape.decode_ctx_sum + pad, shape.sampled_seqs))
