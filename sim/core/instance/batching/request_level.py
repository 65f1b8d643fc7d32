"""Request-level batching, the shared half of `static.py` and `dynamic.py`: when the instance is free a batch is
formed from `waiting` and runs to completion; nobody joins mid-way.

The batch's first iteration prefills every prompt, later iterations decode the members still generating; finished
members leave, but their slots stay empty until the whole batch is done. KV for each member's whole life (prompt
+ output) is reserved at admission, so a request-level batch never preempts, and its decode iterations can be
priced as one run (no arrival can change them).
"""
from __future__ import annotations

from collections import deque

from sim.core.instance.batch import ScheduledBatch, known_tokens
from sim.core.instance.batching.base import advance, match_prefix, steady_decode_steps, take_all, unmatch_prefix
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest


def run_to_completion_step(running: list[SimRequest], load_s: float = 0.0) -> ScheduledBatch:
    """One iteration of a running request-level batch: each member computes all its pending tokens."""
    return ScheduledBatch([(r, known_tokens(r) - r.num_computed_tokens) for r in running], load_s)


def reserve(kv: BlockManager, req: SimRequest) -> float | None:
    """Reserve KV for the request's whole life (prompt + output) up front, after skipping its cached prefix.
    Returns the second-tier load seconds, or None (and no change) when it does not fit."""
    fresh = req.num_computed_tokens == 0
    load_s = match_prefix(kv, req) if fresh else 0.0
    if kv.grow(req, req.total_tokens):
        return load_s
    if fresh:
        unmatch_prefix(kv, req)
    return None


class RequestLevelBatching:
    """What static and dynamic batching share; each forms its batches in `schedule`."""

    def __init__(self, kv: BlockManager) -> None:
        self.kv = kv
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.lookahead_tokens = 0          # (a batch reserves its requests' whole outputs at admission)
        self.undelivered: set[int] = set()  # (every token is sent when computed)

    @classmethod
    def whole_prompt_limit(cls, params: dict) -> int | None:
        return None

    def drop_all(self) -> list[SimRequest]:
        return take_all(self.waiting, self.running)

    def add_request(self, req: SimRequest, now: float) -> None:
        self.waiting.append(req)

    def joins_next_boundary(self) -> bool:
        """A running request-level batch admits nobody: arrivals never cut its decode runs short."""
        return False

    def steady_steps(self, batch: ScheduledBatch) -> int:
        """A running request-level batch admits nobody: its decode iterations can be priced at once."""
        return steady_decode_steps(batch, self.kv)

    def update_from_output(self, batch: ScheduledBatch, now: float) -> list[SimRequest]:
        return advance(batch, now, self.kv, self.running)
