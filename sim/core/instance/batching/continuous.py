"""Continuous (iteration-level) batching, with optional Sarathi-style chunked prefill."""
from __future__ import annotations

from collections import deque

from sim.core.instance.batch import ScheduledBatch, known_tokens
from sim.core.instance.batching.base import advance, match_prefix, steady_decode_steps, take_all, unmatch_prefix
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest


class ContinuousBatching:
    """Iteration-level batching (Orca / vLLM): running requests first, then admissions from `waiting` in FCFS
    order under `token_budget` tokens and `max_num_seqs` sequences per iteration.

    With `chunked_prefill` (Sarathi), a prompt that does not fit the remaining budget is split into chunks
    that share iterations with decodes; without it a prompt is scheduled whole or waits.
    When a running request needs a KV block and none is free, the most recently admitted request is
    preempted (recomputed later, counted per request) and nothing new is admitted in that iteration.
    """

    def __init__(self, kv: BlockManager, *, token_budget: int = 8192, max_num_seqs: int = 256,
                 chunked_prefill: bool = False) -> None:
        if token_budget < 1 or max_num_seqs < 1:
            raise ValueError('"token_budget" and "max_num_seqs" must be >= 1')
        self.kv = kv
        self.token_budget = token_budget
        self.max_num_seqs = max_num_seqs
        self.chunked_prefill = chunked_prefill
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self._admission_tried = False  # the last schedule() tried to admit the head of `waiting`
        self.lookahead_tokens = 0  # KV slots reserved beyond each decode for speculative drafts (vLLM's lookahead)
        self.undelivered: set[int] = set()  # (every token is sent when computed)

    @classmethod
    def whole_prompt_limit(cls, params: dict) -> int | None:
        return None if params.get("chunked_prefill", False) else int(params.get("token_budget", 8192))

    def drop_all(self) -> list[SimRequest]:
        self._admission_tried = False
        return take_all(self.waiting, self.running)

    def add_request(self, req: SimRequest, now: float) -> None:
        self.waiting.append(req)

    def _preempt(self, victim: SimRequest) -> None:
        self.kv.free(victim)
        victim.reset_for_recompute()
        self.waiting.appendleft(victim)

    def schedule(self, now: float) -> ScheduledBatch | None:
        budget = self.token_budget
        items: list[tuple[SimRequest, int]] = []
        preempted = False
        i = 0
        running, kv, lookahead = self.running, self.kv, self.lookahead_tokens
        while i < len(running) and budget > 0:
            req = running[i]
            c = req.num_computed_tokens
            n = min(req.prompt_tokens + req.num_output_tokens - c, budget)  # its known tokens not yet computed
            extra = lookahead if n == 1 and req.num_output_tokens else 0
            while not kv.grow(req, c + n + extra):
                victim = self.running.pop()
                self._preempt(victim)
                preempted = True
                if victim is req:
                    break
            else:
                items.append((req, n))
                budget -= n
                i += 1
                continue
            break  # the request itself was preempted: it was the last in `running`
        load_s = 0.0
        self._admission_tried = not preempted
        if not preempted:
            while self.waiting and len(self.running) < self.max_num_seqs and budget > 0:
                req = self.waiting[0]
                fresh = req.num_computed_tokens == 0
                req_load_s = match_prefix(self.kv, req) if fresh else 0.0
                n = known_tokens(req) - req.num_computed_tokens
                if n > budget and not self.chunked_prefill:
                    n = 0
                n = min(n, budget)
                if n == 0 or not self.kv.grow(req, req.num_computed_tokens + n):
                    if fresh:
                        unmatch_prefix(self.kv, req)
                    break
                self.waiting.popleft()
                self.running.append(req)
                items.append((req, n))
                budget -= n
                load_s += req_load_s
        return ScheduledBatch(items, load_s) if items else None

    def steady_steps(self, batch: ScheduledBatch) -> int:
        """Decode iterations that can be priced at once: only when no waiting request could join. A waiting
        request this iteration's admission stopped at stays out for the whole run: the budget left after the
        decodes is the same at every step, free KV only shrinks, and the prefix cache does not change (nothing is
        published or evicted while decodes grow into free blocks); after a preemption admission was not tried,
        so the next iteration is stepped. A first iteration with prefills is folded into the run only when
        nobody waits: the budget its prefills take is free again at the next boundary."""
        if self.waiting and (batch.shape.prefill_seqs or
                             (len(self.running) < self.max_num_seqs and not self._admission_tried)):
            return 0
        if len(batch.items) != len(self.running):
            return 0
        return steady_decode_steps(batch, self.kv)

    def joins_next_boundary(self) -> bool:
        """Whether the request that just arrived during a decode run could be admitted at the run's next
        iteration boundary (else the run is not cut short): not while every sequence slot is taken, nor behind
        another waiting request. A run with requests waiting is planned only when admission stopped at the
        head (see `steady_steps`), which stays out for the run; one that started with none waiting was already
        cut by the first arrival. Admission is first come, first served."""
        return len(self.running) < self.max_num_seqs and len(self.waiting) <= 1

    def update_from_output(self, batch: ScheduledBatch, now: float) -> list[SimRequest]:
        return advance(batch, now, self.kv, self.running)


class ChunkedPrefillBatching(ContinuousBatching):
    """`ContinuousBatching` with Sarathi-style chunked prefill (the `chunked_prefill` yaml)."""

    def __init__(self, kv: BlockManager, *, token_budget: int = 8192, max_num_seqs: int = 256) -> None:
        super().__init__(kv, token_budget=token_budget, max_num_seqs=max_num_seqs, chunked_prefill=True)

    @classmethod
    def whole_prompt_limit(cls, params: dict) -> int | None:
        return None
