"""One serving instance, driven by SimPy events: form a batch, price it, wait its time, apply it, repeat.

The instance is an event-driven state machine rather than a SimPy process: each iteration (or priced run of
decode iterations) is one timeout whose callback applies it and schedules the next. An arrival during a run of
decode iterations moves the run's end to the next iteration boundary (a new timeout; the old one goes stale and
is ignored), so a request joins exactly where stepping one iteration at a time would let it join.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

import numpy as np
import simpy

from sim.core.cost.base import PARTS, CostModel, StepCost, one_prompt
from sim.core.cost.tables import StepTable
from sim.core.instance.batch import ScheduledBatch, decodes_after
from sim.core.instance.batching import BatchingPolicy
from sim.core.instance.batching.base import accept_tokens, bulk_decode
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest
from sim.core.instance.itl import ItlSketch

_N_PARTS: Final = len(PARTS)  # a step cost's parts vector length
# The front end's iteration time (`step_avg_s`, sim/core/instance/frontend.py) averages the last ~32 iterations
# exponentially: long enough to hold a stream's time per output token through the prefill iterations among them.
STEP_AVERAGE_ITERATIONS: Final = 32
_STEP_KEEP: Final = 1.0 - 1.0 / STEP_AVERAGE_ITERATIONS

# What the instance is doing between events.
IDLE, WAKE, TIMER, STEP, RUN, APPLY = "idle", "wake", "timer", "step", "run", "apply"


class _Run:
    """A run of iterations in flight from `start_s`: `m` iterations are taken (fewer than planned when an arrival
    cut it short), the last ending at `end_s`. Its decode iterations are `batch`, priced by the strided slice
    `table.times[first + j * stride]`; with a `head` (a batch and its StepCost), iteration 0 is that batch, whose
    prefills finish at `head_end_s`, and the decodes follow it. Iteration ends are summed from the start in
    order, one addition per iteration: the same sums that stepping one iteration at a time makes."""

    __slots__ = ("batch", "start_s", "table", "first", "stride", "m", "end_s", "head", "head_end_s")

    def __init__(self, batch: ScheduledBatch, start_s: float, table: StepTable, first: int, stride: int, m: int,
                 head: tuple[ScheduledBatch, StepCost] | None, head_end_s: float) -> None:
        self.batch, self.start_s, self.table, self.first, self.stride = batch, start_s, table, first, stride
        self.head, self.head_end_s = head, head_end_s
        self.m = m
        self.end_s = self.end_of(m)

    def end_of(self, m: int) -> float:
        """When iteration m - 1 ends (m >= 1)."""
        times, i, stride = self.table.times, self.first, self.stride
        if self.head is None:
            t, k = self.start_s, m
        else:
            t, k = self.head_end_s, m - 1
        if stride == 0:  # (a table of one constant step)
            step = times[i]
            for _j in range(k):  # the sum stepping makes: one addition per iteration, in order
                t += step
            return t
        for step in times[i:i + k * stride:stride]:  # (a slice: its items are read without bounds checks)
            t += step
        return t

    def cut_at(self, now: float) -> bool:
        """An arrival at `now`: end the run with the iteration in progress then (the first ending at or after
        `now`), one walk from the start. False when the run already ends there."""
        times, i, stride = self.table.times, self.first, self.stride
        if self.head is None:
            t, j = self.start_s, 0
        else:
            t, j = self.head_end_s, 1
            if t >= now:
                return self._cut(1, t)
        while j < self.m:
            t += times[i]
            i += stride
            j += 1
            if t >= now:
                return self._cut(j, t)
        return False

    def _cut(self, m: int, end_s: float) -> bool:
        if m >= self.m:
            return False
        self.m, self.end_s = m, end_s
        return True


class Instance:
    """A model replica on `tp` devices with its own scheduler, KV cache and cost model.

    Lifecycle: `starting` (cold start: provisioning, weight loading, warm-up; takes no requests) -> `active`
    (routers see it) -> `draining` (finishes what it holds, takes nothing new) -> `stopped` (billing ends);
    `fail()` stops an active or draining instance at once, handing back what it held.
    `on_finish(req)` is called for each request that leaves the instance (completed, or handed off to a decode
    pool after its prefill), `on_first_token(req, t_s)` for a request's first token when it reaches the client
    (t_s is the simulated time then: `_first_token`), `on_stopped(inst)` when a draining instance has emptied,
    `on_state()` after each assignment to `state` (whoever makes it). Counters (`busy_s`, `parts_s`,
    `iterations`) feed the metrics; `outstanding` (waiting + running) feeds the routers.
    """

    def __init__(self, env: simpy.Environment, pool: str, index: int, policy: BatchingPolicy, kv: BlockManager,
                 cost: CostModel, on_finish, fast_forward: bool = True, on_first_token=None, on_stopped=None,
                 mtp_rng=None, on_state=None) -> None:
        self.env, self.pool, self.index = env, pool, index
        self.policy, self.kv, self.cost = policy, kv, cost
        self.on_finish = on_finish
        self.on_first_token = on_first_token
        self.on_stopped = on_stopped
        self.on_state = on_state  # called after each assignment to `state` (the pool keeps its active list)
        # Speculative decoding / MTP: each decode step verifies `draft_tokens` drafts, accepted with the cost
        # model's per-draft probabilities (drawn from the instance's own named stream). Runs of steps then differ
        # in the tokens they emit, so they are not fast-forwarded.
        self.draft_tokens = cost.draft_tokens
        self.acceptance = cost.acceptance
        self.mtp_rng = mtp_rng
        self.fast_forward = fast_forward and self.draft_tokens == 0  # price runs of decode iterations in one event
        policy.lookahead_tokens = self.draft_tokens
        self.hidden_s = 0.0  # communication overlapped by compute (not in the iteration times)
        self.state = "starting"
        self.started_s = float(env.now)   # when it was asked for (billing starts)
        self.active_s = float("nan")      # when it became active
        self.stopped_s = float("nan")     # when it stopped (billing ends)
        self.failed_s = float("nan")      # when it failed (then also `stopped_s`), NaN if it never did
        self.busy_s = 0.0
        self.iterations = 0
        self.step_avg_s = 0.0  # recent iteration time: exponential average over ~STEP_AVERAGE_ITERATIONS of them
        self._parts_acc = [0.0] * _N_PARTS  # seconds per part, PARTS order (see `parts_s`)
        self.last_step_end_s = 0.0
        self.clock_ok = True
        self.outstanding = 0  # requests held (waiting + running): submitted minus left, read by every routing
        # An engine preset's front-end time (sim/core/instance/frontend.py): a request enters the scheduler that
        # long after `submit`; held meanwhile (in `outstanding`, and in `_front` for `fail`).
        self.frontend = getattr(policy, "frontend", None)
        # Whose iterations the front end's per-step terms count: this instance's (None), or, on a prefill-role
        # pool's instance, the decode pool's (`Pool.streams_on`): the pool whose iterations stream the tokens.
        self.stream_step_s: Callable[[], float] | None = None
        self._front: dict[int, SimRequest] = {}
        self._prefill_alone_s: dict[int, float] = {}  # prompt tokens -> its prefill alone (the front end's term)
        self._mode = IDLE
        self._pending: simpy.Event | None = None  # the one event this instance acts on; any other is stale
        self._step: tuple[ScheduledBatch, float, StepCost] | None = None
        self._run: _Run | None = None
        self.itl = ItlSketch()  # gaps between consecutive token deliveries (sim/core/metrics.py)

    # Lifecycle (the instance alone assigns `state`): starting -> active -> draining -> stopped; a pre-loaded
    # spare goes warming -> warm -> starting (switch-in) -> active.
    def begin_warming(self) -> None:
        """Loading weights to become a warm spare (not serving)."""
        self.state = "warming"

    def finish_warming(self) -> None:
        """Weights loaded: a warm spare, unless it was switched in or drained meanwhile."""
        if self.state == "warming":
            self.state = "warm"

    def switch_in(self) -> None:
        """A warm spare starts its (short) switch-in to serving."""
        self.state = "starting"

    def activate(self) -> None:
        """Start serving (end of the cold start)."""
        self.state = "active"
        self.active_s = float(self.env.now)
        self._poke()

    def drain(self) -> None:
        """Take no new requests; stop once everything held has finished (nothing in flight is dropped)."""
        if self.state == "starting":
            self._stop()
            return
        self.state = "draining"
        self._poke()

    def fail(self) -> list[SimRequest]:
        """Lost at once (a fault or a spot interruption; sim/core/fleet/failures.py): the iteration in flight is
        neither applied nor counted (its event goes stale, and so does the event of a run's first iteration not
        ended yet: its first tokens were never produced), the KV is gone, billing ends now (`stopped`, with
        `failed_s` set). Returns every request it held, each reset to recompute its work from nothing elsewhere
        (its emitted tokens stay emitted), in request order; the caller re-routes or rejects them."""
        held = self.policy.drop_all() + list(self._front.values())
        self._front.clear()
        for req in held:
            self.kv.free(req)
            req.restart()
        held.sort(key=lambda r: r.request_id)
        self._pending, self._step, self._run, self._mode = None, None, None, IDLE
        self.outstanding = 0
        self.failed_s = float(self.env.now)
        self._stop()
        return held

    def _stop(self) -> None:
        self.state = "stopped"
        self.stopped_s = float(self.env.now)
        if self.on_stopped is not None:
            self.on_stopped(self)

    @property
    def parts_s(self) -> dict[str, float]:
        """Seconds of iterations by part (`sim.core.cost.base.PARTS`), summed over everything this instance ran."""
        return dict(zip(PARTS, self._parts_acc))

    @property
    def state(self) -> str:
        return self._state

    @state.setter
    def state(self, value: str) -> None:
        self._state = value
        if self.on_state is not None:
            self.on_state()

    def submit(self, req: SimRequest, now: float, wakes: list | None = None) -> None:
        """Take `req`. An idle instance re-plans after the events due now (a zero-delay wake-up event), or, with
        `wakes`, is appended there for the caller to `wake()` once it has submitted everything due now (the
        arrival callback: simultaneous arrivals still batch, at one event less per request). `now`: the simulated
        time (the caller's reading: the clock property costs a Python call)."""
        req.pool, req.instance, req.enqueued_s = self.pool, self.index, float(now)
        req.first_token_delay_s = 0.0  # (this instance's front end decides; a request handed over from another
        # instance must not carry that one's)
        # A request handed over by a prefill pool went through the front end there (its client connection,
        # tokenising, first token): this instance's front end does not take it again.
        fe = self.frontend if not req.prefill_pool else None
        if fe is not None:
            stream = self.stream_step_s
            delay = fe.delay_s(req.prompt_tokens, self.outstanding,
                               self.prefill_alone_s(req.prompt_tokens) if fe.needs_prefill else 0.0,
                               self.step_avg_s if stream is None else stream())
            if fe.at_first_token:  # the scheduler takes it now; the client sees its first token `delay` later
                req.first_token_delay_s = delay
                fe = None
        if fe is not None:
            self.outstanding += 1
            self._front[req.request_id] = req
            ev = self.env.timeout(delay, req)  # (the request rides on the event: no closure)
            ev.callbacks.append(self._enter)
            return
        self.outstanding += 1
        self.policy.add_request(req, now)
        mode = self._mode
        if mode is RUN:
            if self.policy.joins_next_boundary():
                self._cut_run(now)
        elif wakes is not None and (mode is IDLE or mode is TIMER) and self._can_plan():
            self._pending, self._mode = None, WAKE
            wakes.append(self)
        else:
            self._poke()

    def prefill_alone_s(self, tokens: int) -> float:
        """Seconds of one prefill of a `tokens`-token prompt with nothing cached, alone on this instance (kept)."""
        s = self._prefill_alone_s.get(tokens)
        if s is None:
            s = self._prefill_alone_s[tokens] = self.cost.step_cost(one_prompt(tokens)).total_s
        return s

    def _enter(self, ev: simpy.Event) -> None:
        """A request (`ev.value`) leaves the front end for the scheduler's `waiting` queue (not if the instance
        failed meanwhile: it was handed back then)."""
        req: SimRequest = ev.value
        if self._front.pop(req.request_id, None) is None:
            return
        now = float(self.env.now)
        self.policy.add_request(req, now)
        if self._mode is RUN:
            if self.policy.joins_next_boundary():
                self._cut_run(now)
        else:
            self._poke()

    def wake(self, now: float) -> None:
        """Plan now (an instance `submit` put on a wake-up list)."""
        if self._mode is WAKE and self._pending is None:
            self._mode = APPLY
            self._next(now)

    # -- events -----------------------------------------------------------------------------------------------
    def _at(self, delay_s: float, mode: str) -> None:
        ev = self.env.timeout(delay_s)
        ev.callbacks.append(self._on_event)
        self._pending, self._mode = ev, mode

    def _can_plan(self) -> bool:
        return self.state != "starting" and self.state != "stopped"

    def _poke(self) -> None:
        """Re-plan at the current time, after the events already due now (so that simultaneous arrivals batch)."""
        if (self._mode is IDLE or self._mode is TIMER) and self._can_plan():
            self._at(0.0, WAKE)

    def _on_event(self, ev: simpy.Event) -> None:
        if ev is not self._pending:
            return  # stale: a timer overtaken by a wake-up, or a run end moved earlier by an arrival
        mode, now = self._mode, self.env.now  # (`now` is read once per event and handed down)
        self._pending = None
        self._mode = APPLY
        if mode is STEP:
            self._end_step(now)
        elif mode is RUN:
            self._end_run(now)
        self._next(now)

    def _next(self, now: float) -> None:
        out = self.policy.schedule(now)
        if out is None:
            self._mode = IDLE
            if self.state == "draining" and self.outstanding == 0:
                self._stop()
            return
        if not isinstance(out, ScheduledBatch):
            self._at(max(0.0, out - now), TIMER)
            return
        steps = self.policy.steady_steps(out) if self.fast_forward else 0
        if steps >= 2:
            self._start_run(out, steps, now)
            return
        # (whether the previous iteration ended exactly now: host work may have run under its GPU time)
        back_to_back = self.iterations > 0 and now == self.last_step_end_s
        cost = self.cost.step_cost(out.shape, out.load_s, out.host_s, out.overlap, back_to_back)
        self._step = (out, float(now), cost)
        self._at(cost.total_s, STEP)

    def _end_step(self, now: float) -> None:
        assert self._step is not None
        batch, start, cost = self._step
        self._step = None
        self._apply_step(batch, start, cost.total_s, cost, now)

    def _apply_step(self, batch: ScheduledBatch, start_s: float, busy_s: float, cost: StepCost, now: float) -> None:
        """Account and apply one iteration (a step, or a run cut after its first iteration)."""
        self.hidden_s += cost.hidden_s
        parts = cost.parts
        self._account(start_s, busy_s, 1, list(parts.values()), now)  # (PARTS order: the StepCost contract)
        self._apply(batch, now)

    def _start_run(self, batch: ScheduledBatch, steps: int, now: float) -> None:
        """Price `steps` iterations at once, decodes of the same members from the second on (the first may finish
        prefills): exactly what stepping one by one gives, the ends being the same sequential sums. The requests
        whose prefill ends with the first iteration emit their first token then, before the run's own event (a
        run cut short still ends its first iteration): one more event, at that iteration's end, tells it
        (`_on_head_end`)."""
        start = float(now)
        head = None
        head_end_s = start
        if batch.shape.prefill_seqs:
            cost = self.cost.step_cost(batch.shape)
            head = (batch, cost)
            head_end_s = start + cost.total_s
            firsts = [req for req, _ in batch.items if req.num_output_tokens == 0]
            if firsts:
                self._at_time(head_end_s, firsts, now).callbacks.append(self._on_head_end)
            batch = decodes_after(batch)
            table, first, stride = self.cost.decode_steps(batch.shape, steps - 1)
        else:
            table, first, stride = self.cost.decode_steps(batch.shape, steps)
        run = self._run = _Run(batch, start, table, first, stride, steps, head, head_end_s)
        self._at(run.end_s - start, RUN)

    def _at_time(self, t_s: float, value: list[SimRequest], now: float) -> simpy.Event:
        """An event at simulated time exactly t_s >= now (the clock adds the delay to `now`, so the delay is
        nudged by units in the last place until that sum is t_s)."""
        delay = t_s - now
        while now + delay < t_s:
            delay = math.nextafter(delay, math.inf)
        while now + delay > t_s and delay > 0.0:
            delay = math.nextafter(delay, 0.0)
        return self.env.timeout(delay, value)

    def _on_head_end(self, ev: simpy.Event) -> None:
        """The first iteration of a run ended: the requests whose prefill it finished (`ev.value`) emit their first
        token now (those not failed over meanwhile: a failed instance produced nothing; nor already told, when
        the run's own event at the same time came first)."""
        if self.failed_s == self.failed_s:  # (not NaN: it failed)
            return
        now = float(self.env.now)
        req: SimRequest
        for req in ev.value:
            if req.first_token_s != req.first_token_s:
                self._first_token(req, now)

    def _first_token(self, req: SimRequest, t_s: float) -> None:
        """`req` emitted its first token, sent to the client at t_s (now): the one place that records it and
        tells the monitors."""
        t_s += req.first_token_delay_s
        req.first_token_s = t_s
        if self.on_first_token is not None:
            self.on_first_token(req, t_s)

    def _cut_run(self, now: float) -> None:
        """An arrival during a run: the iteration in progress finishes, the ones after it are not taken, and the
        new request can join at that boundary, as it would when stepping."""
        run = self._run
        assert run is not None
        if run.cut_at(now):
            self._at(run.end_s - now, RUN)

    def _end_run(self, now: float) -> None:
        run, self._run = self._run, None
        assert run is not None
        m, batch, start_s = run.m, run.batch, run.start_s
        busy_s = run.end_s - start_s
        head_cost = None
        if run.head is not None:
            head, head_cost = run.head
            if m == 1:
                self._apply_step(head, start_s, busy_s, head_cost, now)
                return
            start_s = run.head_end_s
            self.policy.update_from_output(head, start_s)  # (nobody finishes there: the run was planned so)
            self._deliver(head.items, start_s)
        n = m if head_cost is None else m - 1  # decode iterations of `batch`, from start_s on
        bulk_decode(batch.items, n - 1, self.kv)
        if n >= 2:
            self._deliver_run(run, batch, start_s, n - 1)
        parts, hidden_s = run.table.run_parts(run.first, run.stride, n, run.end_s - start_s)
        if head_cost is not None:
            for j, v in enumerate(head_cost.parts.values()):  # (in PARTS order: the StepCost contract)
                parts[j] += v
            hidden_s += head_cost.hidden_s
        self._account(run.start_s, busy_s, m, parts, now)
        self.hidden_s += hidden_s
        self._apply(batch, now)

    # -- bookkeeping ------------------------------------------------------------------------------------------
    def _account(self, start_s: float, busy_s: float, iterations: int, parts: list[float], now: float) -> None:
        """Count iterations that ran from start_s to now, with their seconds by part (PARTS order)."""
        if now < start_s or start_s < self.last_step_end_s:
            self.clock_ok = False
        self.last_step_end_s = now
        self.busy_s += busy_s
        if iterations > 0:
            mean_s = busy_s / iterations
            if self.iterations == 0:
                self.step_avg_s = mean_s
            else:
                self.step_avg_s = mean_s + (self.step_avg_s - mean_s) * _STEP_KEEP ** iterations
        self.iterations += iterations
        acc = self._parts_acc
        for j in range(_N_PARTS):
            acc[j] += parts[j]

    def _accept_drafts(self, batch: ScheduledBatch, now: float) -> list[SimRequest]:
        """Tokens accepted beyond the one each decode emits: draft i is accepted with probability acceptance[i]
        when all earlier drafts were; capped by the tokens the request still has to emit. One block of uniform
        draws per step (a row per decoding request, a column per draft) from the instance's own stream."""
        eligible = [req for req, n in batch.items
                    if n == 1 and req.num_output_tokens >= 2 and not req.handoff and req.status != "completed"]
        if not eligible:  # (finished, a prefill that just emitted its first token, or not a decode)
            return []
        drafts = min(self.draft_tokens, len(self.acceptance))
        draws = self.mtp_rng.random((len(eligible), drafts))
        accepted = np.cumprod(draws < np.asarray(self.acceptance[:drafts]), axis=1).sum(axis=1).tolist()
        done = []
        for req, k in zip(eligible, accepted):
            k = min(k, req.output_tokens - req.num_output_tokens)
            if k and accept_tokens(req, k, now, self.kv, self.policy.running):
                done.append(req)
        return done

    def _apply(self, batch: ScheduledBatch, now: float) -> None:
        """Apply an iteration that ended now. A request that has output tokens, none of them sent before and none
        held back by the policy (a multi-step group sends at its end), gets its first token now."""
        finished = self.policy.update_from_output(batch, now)
        if self.draft_tokens:
            finished += self._accept_drafts(batch, now)
        held = self.policy.undelivered
        for req, _ in batch.items:
            if req.num_output_tokens and req.first_token_s != req.first_token_s and not (
                    held and req.request_id in held):
                self._first_token(req, now)
        for req in finished:  # (a multi-step group's member that finished before the group's last iteration)
            if req.first_token_s != req.first_token_s:
                self._first_token(req, now)
        self._deliver(batch.items, now)
        if finished:
            self._deliver([(r, 0) for r in finished], now)
        self.outstanding -= len(finished)
        for req in finished:
            if req.finish_s < req.first_token_s:  # (a front-end delay on the first token outlasted the decode: the
                # stream arrives in order, so the client has the last token when it has the first)
                req.finish_s = req.first_token_s
                ev = self.env.timeout(req.finish_s - now, req)
                ev.callbacks.append(self._finish_later)
            else:
                self.on_finish(req)

    def _finish_later(self, ev: simpy.Event) -> None:
        """A request (`ev.value`) whose client got its last token after the engine finished it leaves now."""
        self.on_finish(ev.value)

    def _deliver(self, items: list[tuple[SimRequest, int]], now: float) -> None:
        """Requests whose output tokens reached the client now: one ITL gap each since their last delivery
        (a policy that holds tokens back, multi-step groups, keeps them out of the count until it sends them)."""
        held = self.policy.undelivered
        itl = self.itl
        # Members that got their last tokens at the same time have the same gap: one weighted add per run of equal
        # gaps (a sketch add is the costly part; most of a batch shares the previous iteration's end).
        same_gap, same = -1.0, 0
        for req, _ in items:
            out = req.num_output_tokens
            if out <= req.delivered_tokens or (held and req.request_id in held):
                continue
            if req.delivered_tokens:
                gap = now - req.last_token_s
                if gap == same_gap:
                    same += 1
                else:
                    if same:
                        itl.add(same_gap, float(same))
                    same_gap, same = gap, 1
                if not gap <= req.itl_max_s:  # (NaN-safe: the first gap sets it)
                    req.itl_max_s = gap
            req.delivered_tokens, req.last_token_s = out, now
        if same:
            itl.add(same_gap, float(same))

    def _deliver_run(self, run: _Run, batch: ScheduledBatch, start_s: float, k: int) -> None:
        """The first k decode iterations of a run from start_s, applied in bulk: each member gets a token at every
        iteration end (the same sums as `_Run.end_of`); the gaps after the first are common to all members."""
        times, i, stride = run.table.times, run.first, run.stride
        t, ends = start_s, []
        for _j in range(k):
            t += times[i]
            i += stride
            ends.append(t)
        members = [req for req, _ in batch.items]
        itl = self.itl
        for req in members:
            if req.delivered_tokens:
                gap = ends[0] - req.last_token_s
                itl.add(gap)
                if not gap <= req.itl_max_s:
                    req.itl_max_s = gap
        common = 0.0
        w = float(len(members))
        for j in range(1, k):
            gap = ends[j] - ends[j - 1]
            itl.add(gap, w)
            if gap > common:
                common = gap
        for req in members:
            if k > 1 and not common <= req.itl_max_s:
                req.itl_max_s = common
            req.delivered_tokens, req.last_token_s = req.num_output_tokens, ends[-1]
