"""Static batching: wait for a full batch (or a timeout), then run it to completion; nobody joins mid-way.

The classic request-level scheme (FasterTransformer-style): the batch's first iteration prefills every prompt,
later iterations decode the members still generating; finished members leave, but their slots stay empty until
the whole batch is done. KV for each member's full length (prompt + output) is reserved at admission, so a
static batch never preempts.
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


class StaticBatching:
    def __init__(self, kv: BlockManager, *, batch_size: int = 8, timeout_s: float = 0.05) -> None:
        if batch_size < 1:
            raise ValueError('"batch_size" must be >= 1')
        if timeout_s < 0:
            raise ValueError('"timeout_s" must be >= 0')
        self.kv, self.batch_size, self.timeout_s = kv, batch_size, timeout_s
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

    def schedule(self, now: float) -> ScheduledBatch | float | None:
        if self.running:
            return run_to_completion_step(self.running)
        if not self.waiting:
            return None
        deadline = self.waiting[0].enqueued_s + self.timeout_s
        if len(self.waiting) < self.batch_size and now < deadline:
            return deadline
        load_s = 0.0
        while self.waiting and len(self.running) < self.batch_size:
            got = reserve(self.kv, self.waiting[0])
            if got is None:
                break
            load_s += got
            self.running.append(self.waiting.popleft())
        return run_to_completion_step(self.running, load_s) if self.running else None

    def joins_next_boundary(self) -> bool:
        """A running request-level batch admits nobody: arrivals never cut its decode runs short."""
        return False

    def steady_steps(self, batch: ScheduledBatch) -> int:
        """A running request-level batch admits nobody: its decode iterations can be priced at once."""
        return steady_decode_steps(batch, self.kv)

    def update_from_output(self, batch: ScheduledBatch, now: float) -> list[SimRequest]:
        return advance(batch, now, self.kv, self.running)
