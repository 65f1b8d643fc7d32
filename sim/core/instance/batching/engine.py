"""An engine's scheduler (vLLM V0/V1, SGLang, TensorRT-LLM) as configured by a preset of `conf/engine/`.

Semantics, each a preset key (`sim/core/instance/engine.py` documents the keys, the yamls their sources):
* `admission`: `on_demand` admits a request when the blocks of its next chunk are free (vLLM; with
  `watermark_fraction` of all blocks kept free at admission, vLLM V0's watermark); `reserve_max_output` admits
  only when the blocks of its whole prompt and maximum output fit beside what every running request may still
  need (TensorRT-LLM GUARANTEED_NO_EVICT: it never preempts); `new_token_ratio` (SGLang) reserves, for each
  running request, `new_token_ratio` x its remaining output, the ratio decaying per step from its initial value
  to its floor and reset on a retraction.
* `preemption`: `recompute` (the last admitted running request gives up its KV and re-prefills) or `retract`
  (SGLang: the request with the most output tokens, ties to the shortest prompt, is retracted and recomputed).
* `iteration`: `mixed` (running requests first, then admissions into the remaining token budget: vLLM V1 and
  V0 with chunked prefill) or `prefill_priority` (an iteration with admitted prefills carries no decodes: vLLM
  V0 without chunked prefill, SGLang without mixed chunks).
* `num_scheduler_steps` k (vLLM V0 multi-step): a decode iteration chosen by the scheduler runs k steps with the
  same members, nothing admitted in between; with `stream_each_step` false the tokens reach the client at the
  end of the k steps (vLLM 0.6.0), so first and last token times are those of the group's end.
* `preemption: swap` (vLLM V0 `preemption_mode=swap`): the victim's KV goes to host memory over the host link
  (`swap_bandwidth_bytes_per_s`, the hardware's), its tokens kept; while any request is swapped out no prompt
  is admitted, and it is swapped back in (same link) as a decode of its next token once its blocks fit. Each
  transfer is priced into the iteration that makes it (`ScheduledBatch.load_s`: tokens x KV bytes per token /
  bandwidth, as second-tier prefix loads are). Host space is `swap_space_bytes`; a victim that does not fit
  there is recomputed (vLLM aborts the request instead: a stated departure).
* Host work (`host_per_seq_s`, `overlap`): each iteration adds `host_per_seq_s` x its sequences to the cost
  model's per-iteration overhead (per-request scheduling, sampling bookkeeping and detokenisation); `overlap`
  says what runs under the previous iteration's GPU time: `none`, `output` (vLLM V0 async output processing:
  the per-sequence part) or `all` (SGLang's overlap scheduler, vLLM V1 `async_scheduling`: all host work, so an
  iteration takes max(gpu, host)). The first iteration after idle exposes all of it (the instance prices it).
  Under `all` the engine forms iteration i+1 before it has processed iteration i's outputs, so a request that
  finishes in iteration i still takes its slot and KV in iteration i+1 (priced as one more decode, its token
  discarded) and its blocks are free for iteration i+2; its tokens are delivered at iteration i's end.
* `cuda_graph_sizes`: a decode-only iteration of n sequences is priced padded to the smallest captured size
  >= n (the padded sequences compute one token each at context 1); above the largest, eager (unpadded).
Runs of iterations are not fast-forwarded (`steady_steps` is 0): each iteration is stepped.
"""
from __future__ import annotations

import bisect
from collections import deque

from sim.core.instance.batch import (OVERLAP_ALL, OVERLAP_NONE, OVERLAP_OUTPUT, ScheduledBatch, _shape,
                                     known_tokens, shape_of)
from sim.core.instance.batching.base import complete, match_prefix, take_all, unmatch_prefix
from sim.core.instance.frontend import FrontEnd
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest

ADMISSIONS = ("on_demand", "reserve_max_output", "new_token_ratio")
PREEMPTIONS = ("recompute", "retract", "swap")
OVERLAPS = {"none": OVERLAP_NONE, "output": OVERLAP_OUTPUT, "all": OVERLAP_ALL}
ITERATIONS = ("mixed", "prefill_priority")


class EngineBatching:
    """The scheduler of one engine preset over `waiting`/`running` (vLLM vocabulary)."""

    def __init__(self, kv: BlockManager, *, max_num_seqs: int, max_num_batched_tokens: int, chunked_prefill: bool,
                 admission: str = "on_demand", watermark_fraction: float = 0.0, preemption: str = "recompute",
                 iteration: str = "mixed", num_scheduler_steps: int = 1, stream_each_step: bool = True,
                 cuda_graph_sizes: tuple = (), new_token_ratio_init: float = 0.7,
                 new_token_ratio_min: float = 0.1, new_token_ratio_decay: float = 0.001,
                 host_per_seq_s: float = 0.0, overlap: str = "none", frontend: FrontEnd | None = None,
                 swap_bandwidth_bytes_per_s: float = 0.0,
                 swap_space_bytes: float = 0.0) -> None:
        if max_num_seqs < 1 or max_num_batched_tokens < 1 or num_scheduler_steps < 1:
            raise ValueError('"max_num_seqs", "max_num_batched_tokens" and "num_scheduler_steps" must be >= 1')
        for key, value, valid in (("admission", admission, ADMISSIONS), ("preemption", preemption, PREEMPTIONS),
                                  ("iteration", iteration, ITERATIONS)):
            if value not in valid:
                raise ValueError(f'"{key}" {value!r} is not one of {", ".join(valid)}')
        if overlap not in OVERLAPS:
            raise ValueError(f'"overlap" {overlap!r} is not one of {", ".join(OVERLAPS)}')
        if host_per_seq_s < 0.0:
            raise ValueError('"host_per_seq_s" must be >= 0')
        if preemption == "swap" and swap_bandwidth_bytes_per_s <= 0.0:
            raise ValueError('"preemption" swap needs the hardware\'s host link bandwidth (> 0)')
        if not 0.0 <= watermark_fraction < 1.0:
            raise ValueError('"watermark_fraction" must be in [0, 1)')
        self.kv = kv
        self.max_num_seqs, self.token_budget = int(max_num_seqs), int(max_num_batched_tokens)
        self.chunked_prefill, self.admission, self.preemption = bool(chunked_prefill), admission, preemption
        self.iteration, self.steps = iteration, int(num_scheduler_steps)
        self.stream_each_step = bool(stream_each_step)
        self.graph_sizes = sorted(int(s) for s in cuda_graph_sizes)
        self.watermark_blocks = int(watermark_fraction * kv.num_blocks)
        self.ratio_init, self.ratio_min, self.ratio_decay = new_token_ratio_init, new_token_ratio_min, new_token_ratio_decay
        self.new_token_ratio = new_token_ratio_init
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.lookahead_tokens = 0
        self.preemptions = 0
        self._group: list[SimRequest] = []   # members of a multi-step decode group in progress
        self._group_left = 0                 # steps of it still to run after the current one
        self.undelivered: set[int] = set()  # request ids with tokens computed but not yet sent (multi-step)
        self.host_per_seq_s, self.overlap = float(host_per_seq_s), OVERLAPS[overlap]
        self.frontend = frontend if frontend is not None and frontend.active else None  # read by the instance
        self._lagging: list[SimRequest] = []  # finished in the last iteration, still in the next (overlap "all")
        self.swap_bandwidth_bytes_per_s, self.swap_space_bytes = float(swap_bandwidth_bytes_per_s), float(swap_space_bytes)
        self.swapped: deque[SimRequest] = deque()  # preempted by swap: KV in host memory, tokens kept
        self.swapped_bytes = 0.0
        self.swaps_out = self.swaps_in = 0
        self._transfer_s = 0.0  # swap seconds of the iteration being scheduled

    @classmethod
    def whole_prompt_limit(cls, params: dict) -> int | None:
        return None  # (built from an engine preset, whose token budget covers the model's context)

    def drop_all(self) -> list[SimRequest]:
        """Waiting, running and swapped-out requests; the finished ones still holding KV release it."""
        held = take_all(self.waiting, self.running) + list(self.swapped)
        self.swapped.clear()
        self.swapped_bytes = 0.0
        self._release_lagging()
        self.undelivered.clear()
        self._group, self._group_left = [], 0
        return held

    def add_request(self, req: SimRequest, now: float) -> None:
        self.waiting.append(req)

    # -- KV --------------------------------------------------------------------------------------------------
    def _reserve_tokens(self, req: SimRequest, admitting: bool) -> int:
        """Tokens of KV `req` is counted as needing by the admission rule: its whole prompt and maximum output
        (reserve_max_output), or what it holds (its known tokens when being admitted) plus `new_token_ratio` x
        its remaining output (SGLang)."""
        if self.admission == "reserve_max_output":
            return req.total_tokens
        base = known_tokens(req) if admitting else req.num_computed_tokens
        return base + int((req.output_tokens - req.num_output_tokens) * self.new_token_ratio)

    def _fits_reserved(self, req: SimRequest) -> bool:
        """reserve_max_output / new_token_ratio: the request's reservation fits beside the running ones'."""
        kv, bs = self.kv, self.kv.block_size_tokens
        need = 0
        for r in self.running:
            need += max(0, -(-self._reserve_tokens(r, False) // bs) - kv.held(r))
        need += max(0, -(-self._reserve_tokens(req, True) // bs) - kv.held(req))
        return need <= kv.free_blocks

    def _victim(self) -> SimRequest:
        if self.preemption == "retract":
            victim = max(self.running, key=lambda r: (r.num_output_tokens, -r.prompt_tokens))
            self.running.remove(victim)
            done = sum(r.num_output_tokens for r in self.running)
            total = sum(r.output_tokens for r in self.running) or 1
            # SGLang: the ratio resets to what the survivors need for `retract_decode_steps` (20) more steps.
            self.new_token_ratio = min(1.0, (done + 20 * len(self.running)) / total)
            return victim
        return self.running.pop()

    def _preempt(self, victim: SimRequest) -> None:
        if self.preemption == "swap":
            moved = victim.num_computed_tokens * self.kv.kv_bytes_per_token
            if self.swapped_bytes + moved <= self.swap_space_bytes:
                self.kv.free(victim)
                self.swapped_bytes += moved
                self._transfer_s += moved / self.swap_bandwidth_bytes_per_s
                self.swaps_out += 1
                self.preemptions += 1
                victim.preemptions += 1
                self.swapped.append(victim)
                return
        self.kv.free(victim)
        victim.reset_for_recompute()
        self.undelivered.discard(victim.request_id)
        self.preemptions += 1
        self.waiting.appendleft(victim)

    # -- scheduling ------------------------------------------------------------------------------------------
    def _decodes(self, budget: int, reserve: int) -> tuple[list, int, bool]:
        """Running requests' next tokens (each growing its KV by `reserve` slots ahead), preempting on shortage."""
        items: list[tuple[SimRequest, int]] = []
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            c = req.num_computed_tokens
            n = min(req.prompt_tokens + req.num_output_tokens - c, budget)
            extra = reserve - 1 if n == 1 and req.num_output_tokens else 0
            while not self.kv.grow(req, c + n + extra + self.lookahead_tokens * (n == 1)):
                victim = self._victim()
                self._preempt(victim)
                preempted = True
                if victim is req:
                    break
            else:
                items.append((req, n))
                budget -= n
                i += 1
                continue
            if req not in self.running:
                continue  # (retraction may take any request: the loop goes on at the same index)
        return items, budget, preempted

    def _admit(self, budget: int, items: list) -> int:
        kv = self.kv
        while self.waiting and len(self.running) < self.max_num_seqs and budget > 0:
            req = self.waiting[0]
            fresh = req.num_computed_tokens == 0
            if fresh:
                match_prefix(kv, req)
            n = known_tokens(req) - req.num_computed_tokens
            if n > budget and not self.chunked_prefill:
                n = 0
            n = min(n, budget)
            ok = n > 0
            if ok and self.admission != "on_demand":
                ok = self._fits_reserved(req)
            if ok and self.watermark_blocks:
                need = kv._own_blocks_for(req, req.num_computed_tokens + n) - kv.held(req)
                ok = kv.free_blocks - need >= self.watermark_blocks
            if not ok or not kv.grow(req, req.num_computed_tokens + n):
                if fresh:
                    unmatch_prefix(kv, req)
                break
            self.waiting.popleft()
            self.running.append(req)
            items.append((req, n))
            budget -= n
        return budget

    def _swap_in(self, budget: int, items: list) -> int:
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
            self._transfer_s += moved / self.swap_bandwidth_bytes_per_s
            self.swaps_in += 1
            self.running.append(req)
            items.append((req, n))
            budget -= n
        return budget

    def _release_lagging(self) -> None:
        for req in self._lagging:
            self.kv.free(req)
        self._lagging = []

    def schedule(self, now: float) -> ScheduledBatch | None:
        out = self._schedule(now)
        if out is None and self._lagging:
            self._release_lagging()  # (idle: the engine processes the last outputs; nothing runs after them)
        return out

    def _schedule(self, now: float) -> ScheduledBatch | None:
        self._transfer_s = 0.0
        if self._group_left > 0:  # a multi-step group goes on with its members (KV reserved at its start)
            self._group_left -= 1
            group = [(r, 1) for r in self._group if r.num_output_tokens < r.output_tokens and r in self.running]
            if group:
                return self._batch(group)
            self._group_left = 0
        if self.admission == "new_token_ratio":
            self.new_token_ratio = max(self.ratio_min, self.new_token_ratio - self.ratio_decay)
        items: list[tuple[SimRequest, int]] = []
        if self.iteration == "prefill_priority":
            budget = self.token_budget
            for r in self.running:  # a chunked prompt in progress goes on first (SGLang's chunked request)
                n = known_tokens(r) - r.num_computed_tokens
                if not (n > 1 or (n == 1 and r.num_output_tokens == 0)):
                    continue
                n = min(n, budget)
                if n > 0 and self.kv.grow(r, r.num_computed_tokens + n):
                    items.append((r, n))
                    budget -= n
            if not self.swapped:  # vLLM V0: no prefills while a request is swapped out
                self._admit(budget, items)
            if items:
                return self._batch(items)
        decodes = self.iteration == "prefill_priority"
        steps = self.steps if decodes or not self.waiting else 1
        items, budget, preempted = self._decodes(self.token_budget, steps)
        if self.swapped and not preempted:
            budget = self._swap_in(budget, items)
        if not preempted and not decodes:
            self._admit(budget, items)
        if not items:
            return None
        if steps > 1 and all(n == 1 for _, n in items):
            self._group = [r for r, _ in items]
            self._group_left = steps - 1
        return self._batch(items)

    def _batch(self, items: list) -> ScheduledBatch:
        shape = shape_of(items)
        seqs = len(items)
        lag = self._lagging
        if lag and (shape.prefill_seqs == 0 or self.iteration == "mixed"):
            # (overlap "all": last iteration's finished requests decode once more, their tokens discarded)
            ctx = sum(r.num_computed_tokens + 1 for r in lag)
            shape = _shape((shape.prefill_seqs, shape.prefill_tokens, shape.prefill_q_ctx_sum, shape.prefill_q_sq_sum,
                            shape.prefill_kv_tokens, shape.decode_seqs + len(lag), shape.decode_ctx_sum + ctx,
                            shape.sampled_seqs + len(lag)))
            seqs += len(lag)
        if self.graph_sizes and shape.prefill_seqs == 0:
            n = shape.decode_seqs
            j = bisect.bisect_left(self.graph_sizes, n)
            if j < len(self.graph_sizes) and self.graph_sizes[j] > n:
                pad = self.graph_sizes[j] - n
                shape = _shape((0, 0, 0, 0, 0, n + pad, shape.decode_ctx_sum + pad, shape.sampled_seqs))
        return ScheduledBatch(items, self._transfer_s, shape, self.host_per_seq_s * seqs, self.overlap)

    def steady_steps(self, batch: ScheduledBatch) -> int:
        return 0

    def joins_next_boundary(self) -> bool:
        return True

    def update_from_output(self, batch: ScheduledBatch, now: float) -> list[SimRequest]:
        """Tokens computed now; sent now, or with multi-step and `stream_each_step` false at the group's end."""
        deliver = self.stream_each_step or self._group_left == 0
        kv, undelivered = self.kv, self.undelivered
        if self._lagging:
            self._release_lagging()
        for req, n in batch.items:
            c, prompt = req.num_computed_tokens, req.prompt_tokens
            if c < prompt <= c + n:
                kv.publish(req, req.prefix_hashes, prompt)
            c += n
            req.num_computed_tokens = c
            if c == prompt + req.num_output_tokens:
                req.num_output_tokens += 1
                undelivered.add(req.request_id)
        if not deliver and all(r.num_output_tokens >= r.output_tokens for r in self._group):
            self._group_left, deliver = 0, True  # every member is done before the group's last step
        if not deliver:
            return []
        finished = []
        for req in list(self.running):
            if req.request_id not in undelivered:
                continue
            undelivered.discard(req.request_id)
            if req.num_output_tokens >= req.output_tokens:
                if self.overlap == OVERLAP_ALL:  # done now; its slot and KV stay one more iteration
                    req.finish_s, req.status = now, "completed"
                    self._lagging.append(req)
                else:
                    complete(req, now, kv)
                finished.append(req)
            elif req.num_output_tokens == 1 and req.handoff:
                kv.free(req)
                finished.append(req)
        if finished:
            done = {r.request_id for r in finished}
            self.running[:] = [r for r in self.running if r.request_id not in done]
        return finished
