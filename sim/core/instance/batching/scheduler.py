"""The one iteration-level scheduler (vLLM vocabulary: `waiting`, `running`, `token_budget`, `max_num_seqs`).

Every iteration: the running requests get their next tokens first (in admission order, each growing its KV; when
the blocks run out a victim is preempted and nothing new is admitted in that iteration), then requests are
admitted from `waiting` first come, first served into the token budget and sequence slots left. Its rules are
settings (rules.py): admission, preemption, iteration mix, chunked prefill, multi-step groups, host work and its
overlap, CUDA-graph padding. An engine preset (`conf/engine/`) sets all of them; the `continuous` and
`chunked_prefill` batching policies are presets of it (presets.py) with vLLM's default rules.

* Chunked prefill (Sarathi; vLLM `enable_chunked_prefill`): a prompt that does not fit the budget left is split
  into chunks sharing iterations with decodes; without it a prompt is scheduled whole or waits.
* Multi-step (`num_scheduler_steps` k, vLLM V0): a decode iteration runs k steps with the same members (their KV
  reserved at the start), nothing admitted in between; with `stream_each_step` false the tokens reach the client
  at the group's end (vLLM 0.6.0), so first and last token times are those of the group's end.
* Swap (vLLM V0 `preemption_mode=swap`): the victim's KV moves to host memory over the host link
  (`swap_bandwidth_bytes_per_s`), its tokens kept; while any request is swapped out a prefill-priority iteration
  admits no prompt, and the request comes back (same link) as a decode of its next token once its blocks fit.
  Each transfer is priced into the iteration that makes it (`ScheduledBatch.load_s`, as second-tier prefix loads
  are). Host space is `swap_space_bytes`; a victim that does not fit there is recomputed (vLLM aborts the request
  instead: a stated departure).
* Host work (`host_per_seq_s`, `overlap`): each iteration adds `host_per_seq_s` x its sequences to the cost
  model's per-iteration overhead (scheduling, sampling bookkeeping, detokenisation); `overlap` says what runs
  under the previous iteration's GPU time: `none`, `output` (vLLM V0 async output processing: the per-sequence
  part) or `all` (SGLang's overlap scheduler, vLLM V1 `async_scheduling`: an iteration takes max(gpu, host)).
  Under `all` the engine forms iteration i+1 before it has processed iteration i's outputs, so a request that
  finishes in iteration i still takes its slot and KV in iteration i+1 (priced as one more decode, its token
  discarded) and its blocks are free for iteration i+2; its tokens are delivered at iteration i's end.
* `cuda_graph_sizes`: a decode-only iteration is priced padded to the next captured size (rules.graph_padded).
* `steady_runs`: runs of identical decode iterations may be priced as one event (`steady_steps`); only with the
  plain rules (mixed, on demand, recompute, one step, no host work, no graphs), whose iterations depend on nothing
  but the members' tokens and the free blocks. The engine presets' scheduler steps every iteration.
"""
from __future__ import annotations

from collections import deque

from sim.core.instance.batch import OVERLAP_ALL, OVERLAP_NONE, ScheduledBatch, known_tokens, shape_of
from sim.core.instance.batching.base import (advance, drop_finished, leaves, match_prefix, steady_decode_steps,
                                             take_all, unmatch_prefix)
from sim.core.instance.batching.rules import (ADMISSIONS, ITERATIONS, MIXED, NEW_TOKEN_RATIO, ON_DEMAND, OVERLAPS,
                                              PREEMPTIONS, PREFILL_PRIORITY, RECOMPUTE, RETRACT, SWAP,
                                              above_watermark, fits_reserved, graph_padded, retract_index,
                                              retracted_ratio, rule, with_lagging)
from sim.core.instance.frontend import FrontEnd
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest


class Scheduler:
    """The scheduler of one instance over `waiting`/`running`, its rules given as settings (module docstring)."""

    def __init__(self, kv: BlockManager, *, max_num_seqs: int, max_num_batched_tokens: int, chunked_prefill: bool,
                 admission: str = "on_demand", watermark_fraction: float = 0.0, preemption: str = "recompute",
                 iteration: str = "mixed", num_scheduler_steps: int = 1, stream_each_step: bool = True,
                 cuda_graph_sizes: tuple[int, ...] = (), new_token_ratio_init: float = 0.7,
                 new_token_ratio_min: float = 0.1, new_token_ratio_decay: float = 0.001,
                 host_per_seq_s: float = 0.0, overlap: str = "none", frontend: FrontEnd | None = None,
                 swap_bandwidth_bytes_per_s: float = 0.0, swap_space_bytes: float = 0.0,
                 steady_runs: bool = False) -> None:
        if max_num_seqs < 1 or max_num_batched_tokens < 1 or num_scheduler_steps < 1:
            raise ValueError('"max_num_seqs", "max_num_batched_tokens" and "num_scheduler_steps" must be >= 1')
        self.admission = rule("admission", admission, ADMISSIONS)
        self.preemption = rule("preemption", preemption, PREEMPTIONS)
        self.iteration = rule("iteration", iteration, ITERATIONS)
        self.overlap = rule("overlap", overlap, OVERLAPS)
        if host_per_seq_s < 0.0:
            raise ValueError('"host_per_seq_s" must be >= 0')
        if self.preemption == SWAP and swap_bandwidth_bytes_per_s <= 0.0:
            raise ValueError('"preemption" swap needs the hardware\'s host link bandwidth (> 0)')
        if not 0.0 <= watermark_fraction < 1.0:
            raise ValueError('"watermark_fraction" must be in [0, 1)')
        self.kv = kv
        self.max_num_seqs, self.token_budget = int(max_num_seqs), int(max_num_batched_tokens)
        self.chunked_prefill = bool(chunked_prefill)
        self.steps = int(num_scheduler_steps)
        self.stream_each_step = bool(stream_each_step)
        self.graph_sizes = sorted(int(s) for s in cuda_graph_sizes)
        self.watermark_blocks = int(watermark_fraction * kv.num_blocks)
        self.ratio_min, self.ratio_decay = float(new_token_ratio_min), float(new_token_ratio_decay)
        self.new_token_ratio = float(new_token_ratio_init)
        # Admission looks beyond the free blocks of the next chunk (a reservation rule or a watermark).
        self.checks_admission = self.admission != ON_DEMAND or self.watermark_blocks > 0
        self.host_per_seq_s = float(host_per_seq_s)
        self.frontend = frontend if frontend is not None and frontend.active else None  # read by the instance
        self.swap_bandwidth_bytes_per_s = float(swap_bandwidth_bytes_per_s)
        self.swap_space_bytes = float(swap_space_bytes)
        plain = (self.iteration == MIXED and self.admission == ON_DEMAND and self.preemption == RECOMPUTE
                 and self.steps == 1 and self.overlap == OVERLAP_NONE and self.host_per_seq_s == 0.0
                 and not self.graph_sizes and self.watermark_blocks == 0)
        if steady_runs and not plain:
            raise ValueError('"steady_runs" needs the plain rules (mixed, on_demand, recompute, one scheduler step, '
                             'no host work, overlap or CUDA graphs)')
        self.steady_runs = bool(steady_runs)
        # An iteration is priced by its members' shape alone (no host work, graph padding or lagging finished
        # requests to add), and its tokens reach the clients when computed, no KV kept after a finish.
        self._priced_as_shaped = self.host_per_seq_s == 0.0 and not self.graph_sizes and self.overlap == OVERLAP_NONE
        self._sent_when_computed = self.stream_each_step and self.overlap != OVERLAP_ALL

        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.lookahead_tokens = 0    # KV slots reserved beyond each decode for speculative drafts (vLLM's lookahead)
        self.undelivered: set[int] = set()  # request ids with tokens computed but not yet sent (multi-step)
        self.preemptions = 0
        self.swapped: deque[SimRequest] = deque()  # preempted by swap: KV in host memory, tokens kept
        self.swapped_bytes = 0.0
        self.swaps_out = 0
        self.swaps_in = 0
        self._load_s = 0.0           # KV moving seconds of the iteration being formed (swaps, second-tier loads)
        self._admission_tried = False  # the last iteration tried to admit the head of `waiting`
        self._group: list[SimRequest] = []  # members of a multi-step decode group in progress
        self._group_left = 0                # steps of it still to run after the current one
        self._lagging: list[SimRequest] = []  # finished in the last iteration, still in the next (overlap `all`)

    @classmethod
    def whole_prompt_limit(cls, params: dict) -> int | None:
        """Without chunked prefill a prompt longer than the token budget is never scheduled."""
        if params.get("chunked_prefill", False) or "max_num_batched_tokens" not in params:
            return None
        return int(params["max_num_batched_tokens"])

    def add_request(self, req: SimRequest, now: float) -> None:
        self.waiting.append(req)

    def drop_all(self) -> list[SimRequest]:
        """Waiting, running and swapped-out requests; the finished ones still holding KV release it."""
        held = take_all(self.waiting, self.running) + list(self.swapped)
        self.swapped.clear()
        self.swapped_bytes = 0.0
        self._release_lagging()
        self.undelivered.clear()
        self._group, self._group_left = [], 0
        self._admission_tried = False
        return held

    # -- forming an iteration --------------------------------------------------------------------------------
    def schedule(self, now: float) -> ScheduledBatch | None:
        self._load_s = 0.0
        if self._group_left > 0:  # a multi-step group goes on with its members (KV reserved at its start)
            self._group_left -= 1
            running = self.running
            group = [(r, 1) for r in self._group if r.num_output_tokens < r.output_tokens and r in running]
            if group:
                return self._batch(group)
            self._group_left = 0
        if self.admission == NEW_TOKEN_RATIO:
            self.new_token_ratio = max(self.ratio_min, self.new_token_ratio - self.ratio_decay)
        if self.iteration == PREFILL_PRIORITY:
            items = self._prefills()
            if items:
                return self._batch(items)
            steps = self.steps
        else:
            steps = self.steps if not self.waiting else 1
        items = []
        budget, preempted = self._grow_running(items, steps)
        self._admission_tried = not preempted
        if not preempted:  # (an iteration that preempted admits nobody: vLLM)
            if self.swapped:
                budget = self._swap_in(budget, items)
            if self.iteration == MIXED:
                self._admit(budget, items)
        if not items:
            if self._lagging:
                self._release_lagging()  # idle: the engine processes the last outputs; nothing runs after them
            return None
        if steps > 1 and all(n == 1 for _, n in items):
            self._group = [r for r, _ in items]
            self._group_left = steps - 1
        if self._priced_as_shaped:
            return ScheduledBatch(items, self._load_s)
        return self._batch(items)

    def _grow_running(self, items: list[tuple[SimRequest, int]], steps: int) -> tuple[int, bool]:
        """The running requests' next tokens into `items`, in order, each growing its KV (by the rest of a
        multi-step group and the speculative lookahead beyond a decode's token); when the blocks run out, victims
        are preempted until the request fits or is itself the victim. Returns (budget left, preempted)."""
        budget = self.token_budget
        preempted = False
        running, kv = self.running, self.kv
        ahead = steps - 1 + self.lookahead_tokens
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            c = req.num_computed_tokens
            n = min(req.prompt_tokens + req.num_output_tokens - c, budget)  # its known tokens not yet computed
            extra = ahead if n == 1 and req.num_output_tokens else 0
            while not kv.grow(req, c + n + extra):
                j = retract_index(running) if self.preemption == RETRACT else len(running) - 1
                victim = running.pop(j)
                if j < i:  # scheduled earlier in this iteration (a retraction): it leaves the iteration too
                    i -= 1
                    budget += _unschedule(items, victim)
                self._preempt(victim)
                preempted = True
                if victim is req:
                    break
            else:
                items.append((req, n))
                budget -= n
                i += 1
            # (when `req` itself was the victim, the request after it now sits at index i)
        return budget, preempted

    def _preempt(self, victim: SimRequest) -> None:
        """`victim` (already out of `running`) gives up its KV: swapped to host memory when it fits there, else
        recomputed later from the head of `waiting`."""
        kv = self.kv
        self.preemptions += 1
        if self.preemption == SWAP:
            moved = victim.num_computed_tokens * kv.kv_bytes_per_token
            if self.swapped_bytes + moved <= self.swap_space_bytes:
                kv.free(victim)
                self.swapped_bytes += moved
                self._load_s += moved / self.swap_bandwidth_bytes_per_s
                self.swaps_out += 1
                victim.preemptions += 1
                self.swapped.append(victim)
                return
        elif self.preemption == RETRACT:
            self.new_token_ratio = retracted_ratio(self.running)
        kv.free(victim)
        victim.reset_for_recompute()
        self.undelivered.discard(victim.request_id)
        self.waiting.appendleft(victim)

    def _admit(self, budget: int, items: list[tuple[SimRequest, int]]) -> int:
        """Requests from the head of `waiting` while sequence slots, budget and blocks (and the admission rule)
        allow; a fresh one first skips its prompt's cached prefix."""
        kv, waiting, running = self.kv, self.waiting, self.running
        while waiting and len(running) < self.max_num_seqs and budget > 0:
            req = waiting[0]
            fresh = req.num_computed_tokens == 0
            load_s = match_prefix(kv, req) if fresh else 0.0
            n = known_tokens(req) - req.num_computed_tokens
            if n > budget and not self.chunked_prefill:
                n = 0
            n = min(n, budget)
            if (n == 0 or (self.checks_admission and not self._admissible(req, n))
                    or not kv.grow(req, req.num_computed_tokens + n)):
                if fresh:
                    unmatch_prefix(kv, req)
                break
            waiting.popleft()
            running.append(req)
            items.append((req, n))
            budget -= n
            self._load_s += load_s
        return budget

    def _admissible(self, req: SimRequest, n: int) -> bool:
        if self.admission != ON_DEMAND and not fits_reserved(req, self.running, self.kv, self.admission,
                                                             self.new_token_ratio):
            return False
        return not self.watermark_blocks or above_watermark(req, n, self.kv, self.watermark_blocks)

    def _prefills(self) -> list[tuple[SimRequest, int]]:
        """Prefill priority: a chunked prompt in progress goes on first (SGLang's chunked request), then
        admissions (none while a request is swapped out: vLLM V0). Empty: the iteration decodes."""
        items: list[tuple[SimRequest, int]] = []
        budget = self.token_budget
        kv = self.kv
        for r in self.running:
            n = known_tokens(r) - r.num_computed_tokens
            if not (n > 1 or (n == 1 and r.num_output_tokens == 0)):
                continue
            n = min(n, budget)
            if n > 0 and kv.grow(r, r.num_computed_tokens + n):
                items.append((r, n))
                budget -= n
        if not self.swapped:
            self._admit(budget, items)
        return items

    def _swap_in(self, budget: int, items: list[tuple[SimRequest, int]]) -> int:
        """Swapped-out requests back in, oldest first, while their blocks fit: each decodes its next token."""
        kv = self.kv
        while self.swapped and len(self.running) < self.max_num_seqs and budget > 0:
            req = self.swapped[0]
            c = req.num_computed_tokens
            n = min(req.prompt_tokens + req.num_output_tokens - c, budget)
            if not kv.grow(req, c + n):
                break
            self.swapped.popleft()
            moved = c * kv.kv_bytes_per_token
            self.swapped_bytes -= moved
            self._load_s += moved / self.swap_bandwidth_bytes_per_s
            self.swaps_in += 1
            self.running.append(req)
            items.append((req, n))
            budget -= n
        return budget

    def _batch(self, items: list[tuple[SimRequest, int]]) -> ScheduledBatch:
        shape = shape_of(items)
        seqs = len(items)
        lag = self._lagging
        if lag and (shape.prefill_seqs == 0 or self.iteration == MIXED):
            shape = with_lagging(shape, lag)
            seqs += len(lag)
        if self.graph_sizes and shape.prefill_seqs == 0:
            shape = graph_padded(shape, self.graph_sizes)
        return ScheduledBatch(items, self._load_s, shape, self.host_per_seq_s * seqs, self.overlap)

    def _release_lagging(self) -> None:
        for req in self._lagging:
            self.kv.free(req)
        self._lagging.clear()

    # -- runs of decode iterations ---------------------------------------------------------------------------
    def steady_steps(self, batch: ScheduledBatch) -> int:
        """Decode iterations that can be priced at once (`steady_runs` only): only when no waiting request could
        join. A waiting request this iteration's admission stopped at stays out for the whole run: the budget left
        after the decodes is the same at every step, free KV only shrinks, and the prefix cache does not change
        (nothing is published or evicted while decodes grow into free blocks); after a preemption admission was
        not tried, so the next iteration is stepped. A first iteration with prefills is folded into the run only
        when nobody waits: the budget its prefills take is free again at the next boundary."""
        if not self.steady_runs:
            return 0
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

    # -- after an iteration ----------------------------------------------------------------------------------
    def update_from_output(self, batch: ScheduledBatch, now: float) -> list[SimRequest]:
        """Tokens computed now; sent now, or with multi-step and `stream_each_step` false at the group's end."""
        if self._sent_when_computed:
            return advance(batch, now, self.kv, self.running)
        if self._lagging:
            self._release_lagging()
        lagging = self._lagging if self.overlap == OVERLAP_ALL else None
        if self.stream_each_step or (self._group_left == 0 and not self.undelivered):
            return advance(batch, now, self.kv, self.running, lagging)
        advance(batch, now, self.kv, self.running, lagging, self.undelivered)
        if self._group_left > 0:
            if not all(r.num_output_tokens >= r.output_tokens for r in self._group):
                return []
            self._group_left = 0  # every member is done before the group's last step
        return self._deliver_held(now, lagging)

    def _deliver_held(self, now: float, lagging: list[SimRequest] | None) -> list[SimRequest]:
        """A multi-step group's end: its held tokens reach the clients, in admission order."""
        held = self.undelivered
        finished: list[SimRequest] = []
        for req in self.running:
            if req.request_id in held:
                held.discard(req.request_id)
                if leaves(req, now, self.kv, lagging):
                    finished.append(req)
        if finished:
            drop_finished(self.running, finished)
        return finished


def _unschedule(items: list[tuple[SimRequest, int]], req: SimRequest) -> int:
    """Take `req` out of the iteration being formed; returns the tokens it had."""
    for j in range(len(items)):
        if items[j][0] is req:
            return items.pop(j)[1]
    return 0
