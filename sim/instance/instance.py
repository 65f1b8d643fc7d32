"""One serving instance as a SimPy process: form a batch, price it, wait its time, apply it, repeat."""
from __future__ import annotations

import bisect
import itertools

import numpy as np
import simpy

from sim.cost.base import PARTS, CostModel, StepCost
from sim.instance.batch import ScheduledBatch
from sim.instance.batching import BatchingPolicy
from sim.instance.batching.base import accept_tokens, bulk_decode
from sim.instance.kv_cache import BlockManager
from sim.instance.request_state import SimRequest


class Instance:
    """A model replica on `tp` devices with its own scheduler, KV cache and cost model.

    Lifecycle: `starting` (cold start: provisioning, weight loading, warm-up; takes no requests) -> `active`
    (routers see it) -> `draining` (finishes what it holds, takes nothing new) -> `stopped` (billing ends).
    `on_finish(req)` is called for each request that leaves the instance (completed, or handed off to a decode
    pool after its prefill), `on_first_token(req)` when a request emits its first token, `on_stopped(inst)` when a
    draining instance has emptied. Counters (`busy_s`, `parts_s`, `iterations`) feed the metrics; `outstanding`
    (waiting + running) feeds the routers.
    """

    def __init__(self, env: simpy.Environment, pool: str, index: int, policy: BatchingPolicy, kv: BlockManager,
                 cost: CostModel, on_finish, fast_forward: bool = True, on_first_token=None, on_stopped=None,
                 mtp_rng=None) -> None:
        self.env, self.pool, self.index = env, pool, index
        self.policy, self.kv, self.cost = policy, kv, cost
        self.on_finish = on_finish
        self.on_first_token = on_first_token
        self.on_stopped = on_stopped
        # Speculative decoding / MTP: each decode step verifies `draft_tokens` drafts, accepted with the cost
        # model's per-draft probabilities (drawn from the instance's own named stream). Runs of steps then differ
        # in the tokens they emit, so they are not fast-forwarded.
        self.draft_tokens = int(getattr(cost, "draft_tokens", 0) or 0)
        self.acceptance = tuple(getattr(cost, "acceptance", ()) or ())
        self.mtp_rng = mtp_rng
        self.fast_forward = fast_forward and self.draft_tokens == 0  # price runs of decode iterations in one event
        if self.draft_tokens and hasattr(policy, "lookahead_tokens"):
            policy.lookahead_tokens = self.draft_tokens
        self.hidden_s = 0.0  # communication overlapped by compute (not in the iteration times)
        self.state = "starting"
        self.started_s = float(env.now)   # when it was asked for (billing starts)
        self.active_s = float("nan")      # when it became active
        self.stopped_s = float("nan")     # when it stopped (billing ends)
        self.busy_s = 0.0
        self.iterations = 0
        self.parts_s = dict.fromkeys(PARTS, 0.0)
        self.last_step_end_s = 0.0
        self.clock_ok = True
        self._wakeup: simpy.Event | None = None
        self.process = None

    def activate(self) -> None:
        """Start serving (end of the cold start)."""
        self.state = "active"
        self.active_s = float(self.env.now)
        self.process = self.env.process(self._run())

    def drain(self) -> None:
        """Take no new requests; stop once everything held has finished (nothing in flight is dropped)."""
        if self.state == "starting":
            self._stop()
            return
        self.state = "draining"
        self._poke()

    def _stop(self) -> None:
        self.state = "stopped"
        self.stopped_s = float(self.env.now)
        if self.on_stopped is not None:
            self.on_stopped(self)

    def _poke(self) -> None:
        if self._wakeup is not None and not self._wakeup.triggered:
            self._wakeup.succeed()

    @property
    def outstanding(self) -> int:
        return len(self.policy.waiting) + len(self.policy.running)

    def submit(self, req: SimRequest) -> None:
        req.pool, req.instance, req.enqueued_s = self.pool, self.index, float(self.env.now)
        self.policy.add_request(req, self.env.now)
        self._poke()

    def _run(self):
        env = self.env
        while True:
            out = self.policy.schedule(env.now)
            if out is None and self.state == "draining" and self.outstanding == 0:
                self._stop()
                return
            if out is None or not isinstance(out, ScheduledBatch):
                self._wakeup = env.event()
                if out is None:
                    yield self._wakeup
                else:
                    yield self._wakeup | env.timeout(max(0.0, out - env.now))
                self._wakeup = None
                continue
            steps = self.policy.steady_steps(out) if self.fast_forward else 0
            if steps >= 2:
                yield from self._decode_run(out, steps)
                continue
            cost = self.cost.step_cost(out.shape)
            if out.load_s:
                parts = dict(cost.parts)
                parts["communication"] += out.load_s
                cost = StepCost(cost.total_s + out.load_s, parts, cost.hidden_s)
            start = env.now
            yield env.timeout(cost.total_s)
            self.hidden_s += cost.hidden_s
            self._account(start, cost.total_s, 1, cost.parts)
            self._apply(out)

    def _account(self, start_s: float, busy_s: float, iterations: int, parts: dict) -> None:
        if self.env.now < start_s or start_s < self.last_step_end_s:
            self.clock_ok = False
        self.last_step_end_s = self.env.now
        self.busy_s += busy_s
        self.iterations += iterations
        for k, v in parts.items():
            self.parts_s[k] += v

    def _decode_run(self, batch: ScheduledBatch, steps: int):
        """Price `steps` identical-membership decode iterations in one event (exactly what stepping one by one
        gives). An arrival interrupts the run: the iteration in progress finishes, the ones after it are not
        taken, and the new request can join at that boundary, as it would when stepping."""
        env = self.env
        totals, parts, hidden = self.cost.decode_run(batch.shape, steps, with_hidden=True, compact=True)
        start = env.now
        ends = list(itertools.accumulate(totals.tolist(), initial=start))[1:]  # exact step-by-step sums
        self._wakeup = env.event()
        done = env.timeout(ends[-1] - start)
        yield done | self._wakeup
        self._wakeup = None
        if done.processed or env.now >= ends[-1]:
            m = steps
        else:
            m = bisect.bisect_left(ends, env.now) + 1
            if env.now < ends[m - 1]:
                yield env.timeout(ends[m - 1] - env.now)
        bulk_decode(batch.items, m - 1, self.kv)
        applied = {k: (float(v[:m].sum()) if isinstance(v, np.ndarray) else v * m) for k, v in parts.items()}
        self.hidden_s += float(np.sum(hidden[:m])) if isinstance(hidden, np.ndarray) else hidden * m
        self._account(start, ends[m - 1] - start, m, applied)
        self._apply(ScheduledBatch(batch.items))

    def _accept_drafts(self, batch: ScheduledBatch, now: float) -> list[SimRequest]:
        """Tokens accepted beyond the one each decode emits: draft i is accepted with probability acceptance[i]
        when all earlier drafts were; capped by the tokens the request still has to emit."""
        done = []
        for req, n in batch.items:
            if req.status == "completed" or req.handoff or req.num_output_tokens < 2 or n != 1:
                continue  # finished, a prefill that just emitted its first token, or not a decode
            k = 0
            for a in self.acceptance[: self.draft_tokens]:
                if self.mtp_rng.random() >= a:
                    break
                k += 1
            k = min(k, req.output_tokens - req.num_output_tokens)
            if k and accept_tokens(req, k, now, self.kv, self.policy.running):
                done.append(req)
        return done

    def _apply(self, batch: ScheduledBatch) -> None:
        now = self.env.now
        finished = self.policy.update_from_output(batch, now)
        if self.draft_tokens:
            finished += self._accept_drafts(batch, now)
        if self.on_first_token is not None:
            for req, _ in batch.items:
                if req.num_output_tokens == 1 and req.first_token_s == now:
                    self.on_first_token(req)
        for req in finished:
            self.on_finish(req)
