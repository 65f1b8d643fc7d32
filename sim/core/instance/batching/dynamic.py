"""Dynamic batching: length-aware buckets formed from the waiting queue, each run to completion.

The classic serving-framework policy: when the instance is free, sort the waiting requests by prompt length,
cut them into buckets of at most `max_batch_size` requests and `max_batch_tokens` prompt tokens, merge buckets
smaller than `min_batch_size` into a neighbour when the caps allow, and run the bucket holding the oldest request.
A batch forms as soon as `max_batch_size` requests wait or the oldest has waited `max_wait_s`; with
`adaptive_wait` the wait shrinks to the time `min_batch_size` arrivals take at the measured arrival rate
(EWMA of inter-arrival times), never above `max_wait_s`. Defaults follow the published example of this policy:
at most 32 requests and 2,048 prompt tokens per batch, batches of fewer than 4 merged.
"""
from __future__ import annotations

import math
from collections import deque

from sim.core.instance.batch import ScheduledBatch
from sim.core.instance.batching.request_level import RequestLevelBatching, reserve, run_to_completion_step
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest


def length_buckets(reqs: list[SimRequest], max_batch_size: int, max_batch_tokens: int,
                   min_batch_size: int) -> list[list[SimRequest]]:
    """Split requests sorted by prompt length into capped buckets; merge too-small ones when caps allow."""
    order = sorted(reqs, key=lambda r: (r.prompt_tokens, r.request_id))
    buckets: list[list[SimRequest]] = []
    cur: list[SimRequest] = []
    tokens = 0
    for r in order:
        if cur and (len(cur) >= max_batch_size or tokens + r.prompt_tokens > max_batch_tokens):
            buckets.append(cur)
            cur, tokens = [], 0
        cur.append(r)
        tokens += r.prompt_tokens
    if cur:
        buckets.append(cur)
    merged: list[list[SimRequest]] = []
    for b in buckets:
        if merged and (len(b) < min_batch_size or len(merged[-1]) < min_batch_size):
            prev = merged[-1]
            if (len(prev) + len(b) <= max_batch_size
                    and sum(r.prompt_tokens for r in prev) + sum(r.prompt_tokens for r in b) <= max_batch_tokens):
                prev.extend(b)
                continue
        merged.append(b)
    return merged


class DynamicBatching(RequestLevelBatching):
    """Length-aware buckets, the one holding the oldest request run to completion (module docstring)."""

    def __init__(self, kv: BlockManager, *, max_batch_size: int = 32, max_batch_tokens: int = 2048,
                 min_batch_size: int = 4, max_wait_s: float = 0.05, adaptive_wait: bool = True,
                 rate_ewma_weight: float = 0.1) -> None:
        if min(max_batch_size, max_batch_tokens, min_batch_size) < 1 or max_wait_s < 0:
            raise ValueError('"max_batch_size", "max_batch_tokens", "min_batch_size" must be >= 1, "max_wait_s" >= 0')
        super().__init__(kv)
        self.max_batch_size, self.max_batch_tokens, self.min_batch_size = max_batch_size, max_batch_tokens, min_batch_size
        self.max_wait_s, self.adaptive_wait, self.rate_ewma_weight = max_wait_s, adaptive_wait, rate_ewma_weight
        self._mean_gap_s = math.nan
        self._last_arrival_s = math.nan

    def add_request(self, req: SimRequest, now: float) -> None:
        if not math.isnan(self._last_arrival_s):
            gap = now - self._last_arrival_s
            w = self.rate_ewma_weight
            self._mean_gap_s = gap if math.isnan(self._mean_gap_s) else (1 - w) * self._mean_gap_s + w * gap
        self._last_arrival_s = now
        self.waiting.append(req)

    @property
    def wait_s(self) -> float:
        """How long the oldest request may wait for a batch to fill."""
        if not self.adaptive_wait or math.isnan(self._mean_gap_s):
            return self.max_wait_s
        return min(self.max_wait_s, self.min_batch_size * self._mean_gap_s)

    def schedule(self, now: float) -> ScheduledBatch | float | None:
        if self.running:
            return run_to_completion_step(self.running)
        if not self.waiting:
            return None
        deadline = self.waiting[0].enqueued_s + self.wait_s
        if len(self.waiting) < self.max_batch_size and now < deadline:
            return deadline
        oldest = self.waiting[0]
        bucket = next(b for b in length_buckets(list(self.waiting), self.max_batch_size, self.max_batch_tokens,
                                                self.min_batch_size) if oldest in b)
        chosen = []
        load_s = 0.0
        for r in sorted(bucket, key=lambda r: r.enqueued_s):
            got = reserve(self.kv, r)
            if got is not None:
                chosen.append(r)
                load_s += got
        if not chosen:
            return None
        ids = {r.request_id for r in chosen}
        self.waiting = deque(r for r in self.waiting if r.request_id not in ids)
        self.running = chosen
        return run_to_completion_step(self.running, load_s)
