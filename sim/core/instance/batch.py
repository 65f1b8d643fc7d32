"""One scheduled iteration: `{request: num_new_tokens}` (vLLM's SchedulerOutput) and its cost-model shape."""
from __future__ import annotations

from sim.core.cost.base import BatchShape
from sim.core.cost.host_overlap import OVERLAP_ALL, OVERLAP_NONE, OVERLAP_OUTPUT
from sim.core.instance.request_state import SimRequest


def _shape(fields: tuple) -> BatchShape:
    """A BatchShape from its eight fields in order, without the named tuple's Python-level constructor (this runs
    for every iteration and run planned)."""
    return tuple.__new__(BatchShape, fields)


def known_tokens(req: SimRequest) -> int:
    """Tokens whose KV must exist before the next token can be sampled: the prompt plus the outputs so far."""
    return req.prompt_tokens + req.num_output_tokens



class ScheduledBatch:
    """The requests of one iteration with the number of tokens each computes."""

    __slots__ = ("items", "shape", "load_s", "host_s", "overlap")

    def __init__(self, items: list[tuple[SimRequest, int]], load_s: float = 0.0, shape: BatchShape | None = None,
                 host_s: float = 0.0, overlap: int = 0) -> None:
        self.items = items
        self.shape = shape_of(items) if shape is None else shape  # (given when the requests are not there yet)
        self.load_s = load_s  # seconds moving KV (second-tier prefix loads, swaps) before this iteration can run
        # Engine presets only (0 otherwise: the cost model's price stands): host seconds this iteration adds to the
        # cost model's per-iteration overhead (per-sequence work), and which host work runs under the previous
        # iteration's GPU time: OVERLAP_NONE, OVERLAP_OUTPUT (the per-sequence part) or OVERLAP_ALL.
        self.host_s = host_s
        self.overlap = overlap

    def __len__(self) -> int:
        return len(self.items)


def decodes_after(batch: ScheduledBatch) -> ScheduledBatch:
    """The iteration after `batch` when every member decodes next (its prefills finish in `batch`): members with
    one token each, priced at the contexts they will have then (their requests are not advanced yet)."""
    n = len(batch.items)
    ctx = n
    items: list[tuple[SimRequest, int]] = []
    for req, k in batch.items:
        ctx += req.num_computed_tokens + k
        items.append((req, 1))
    return ScheduledBatch(items, 0.0, _shape((0, 0, 0, 0, 0, n, ctx, n)))


def shape_of(items: list[tuple[SimRequest, int]]) -> BatchShape:
    """Aggregate a batch for the cost model: a request computing its last known token is a decode, anything
    else (first prefill, a chunk, a recompute after preemption) is a prefill chunk."""
    p_seqs = p_tok = p_qc = p_qq = p_kv = d_seqs = d_ctx = sampled = 0
    for req, n in items:
        c = req.num_computed_tokens
        target = req.prompt_tokens + req.num_output_tokens
        if req.num_output_tokens > 0 and target - c == 1:
            d_seqs += 1
            d_ctx += c + 1
            sampled += 1
        else:
            p_seqs += 1
            p_tok += n
            p_qc += n * c
            p_qq += n * (n + 1) // 2
            p_kv += c + n
            if c + n == target:
                sampled += 1
    return _shape((p_seqs, p_tok, p_qc, p_qq, p_kv, d_seqs, d_ctx, sampled))
