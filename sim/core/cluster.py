"""The whole cluster of one run: pools, per-pool routers and autoscalers, placement, the overload ladder,
prefill/decode hand-offs, and the arrival process that feeds it all.

Per request: arrival (+ front-end overhead) -> overload ladder (reject / fallback) -> placement (which pool) ->
admission checks (length, queue cap) -> the pool's router -> an instance. A prefill pool's request returns here
after its first token and moves, after its KV transfer, to the paired decode pool. A request whose instance
fails returns to its pool's router (`_on_failure`).
"""
from __future__ import annotations

import simpy

from scenarios.workload import Workload
from inferplan.config.run import RunConfig
from sim.core.cost.factory import kv_handoff_s
from sim.core.fleet.autoscaler import FixedScaler, ScalerContext, make_autoscaler, run_autoscaler
from sim.core.fleet.failures import PoolFailures, peak_s
from sim.core.fleet.monitor import PoolMonitor
from sim.core.fleet.overload import BREAKER, FALLBACK, SCALE_UP, OverloadLadder
from sim.core.fleet.placement import PLACEMENTS
from sim.core.fleet.pool import Pool
from sim.core.fleet.rolling_update import RollingUpdate
from sim.core.instance.request_state import SimRequest
from sim.core.metrics import RequestRecorder
from sim.core.router import make_router

ARRIVAL_CHUNK = 4096  # workload rows converted to Python lists at a time (see Cluster._load_chunk)


class Cluster:
    """Everything that happens between a request's arrival and its instance."""

    def __init__(self, env: simpy.Environment, run: RunConfig, workload: Workload, recorder: RequestRecorder) -> None:
        self.env, self.run, self.workload, self.recorder = env, run, workload, recorder
        scen = run.scenario
        self.pools: dict[str, Pool] = {
            name: Pool(env, name, p, run, on_finish=self._on_leave, on_first_token=self._on_first_token,
                       hash_block_tokens=workload.hash_block_tokens)
            for name, p in run.pools.items()}
        for pool in self.pools.values():
            if pool.hands_off_to:
                pool.streams_on(self.pools[pool.hands_off_to])
        peak_at_s = -1.0  # (the workload's peak, found once if a pool fails at it: sim/core/fleet/failures.py)
        for name, pool in self.pools.items():
            pool.on_capacity = self._capacity_changed
            pool.on_failure = self._on_failure
            plan = run.setups[name].failures
            if plan.enabled:
                if peak_at_s < 0.0:
                    peak_at_s = peak_s(workload.arrival_s)
                pool.failures = PoolFailures(env, pool, plan, run.seed, peak_at_s)
                pool.failures.start()
        self.monitors = {name: PoolMonitor(scen.monitor_window_s) for name in self.pools}
        fleet = run.fleet  # validated at load (sim/resolve.py)
        self.max_outstanding = fleet.max_outstanding
        self.routers = {name: make_router(fleet.router.name, fleet.router.kwargs()) for name in self.pools}
        self.placement = PLACEMENTS[fleet.placement.name](**fleet.placement.kwargs())
        self.overload = OverloadLadder(fleet.overload)
        oc = self.overload.cfg
        self.watched = oc.watch_pools or [n for n in self.pools if n != oc.fallback_pool]
        self.scalers = {}
        context = ScalerContext(arrival_times_s=workload.arrival_s)
        for name, spec in fleet.autoscalers:
            self.scalers[name] = make_autoscaler(spec.name, spec.kwargs(), context)
        self.scale_log: list = []
        for name, scaler in self.scalers.items():
            if not isinstance(scaler, FixedScaler):
                env.process(run_autoscaler(env, self.pools[name], self.monitors[name], scaler, self.scale_log))
        if oc.enabled:
            env.process(self._overload_loop())
        if fleet.rolling_update is not None:
            RollingUpdate(env, self.pools, fleet.rolling_update).start()
        self.in_transit: dict[int, SimRequest] = {}  # prefill -> decode KV transfers under way
        self.finished = 0  # completed or rejected
        self.all_done = env.event()
        self._overhead_s = float(scen.frontend_overhead_s)
        self._next_arrival = 0
        self._n_requests = len(workload)
        # The workload's columns for requests [_chunk_lo, _chunk_hi) as Python lists (read per request: list items
        # are cheap to read in compiled code, numpy elements are not; a chunk at a time keeps memory bounded).
        self._chunk_lo = self._chunk_hi = 0
        self._c_due: list[float] = []
        self._c_arrival: list[float] = []
        self._c_prompt: list[int] = []
        self._c_output: list[int] = []
        self._c_class: list[int] = []
        self._c_priority: list[int] = []
        self._wakes: list | None = None  # see _arrive
        # Closed-loop clients (`traffic.kind: closed_loop`): request i is released when a client frees (a request
        # ends), `think_time_s` later; its arrival time is written into the workload then.
        closed = workload.metadata.get("closed_loop")
        self._think_s = float(closed["think_time_s"]) if closed else -1.0
        self._released = min(int(closed["clients"]), self._n_requests) if closed else self._n_requests
        self.last_send_s = 0.0  # when a closed-loop client last sent (the drain timeout counts from it)
        if closed:
            self.workload.arrival_s.setflags(write=True)
        self._schedule_arrival(env.now)

    # -- wiring -----------------------------------------------------------------------------------------------
    def _overload_loop(self):
        oc = self.overload.cfg
        while True:
            yield self.env.timeout(oc.check_interval_s)
            level = self.overload.update(self.env.now)
            for name in self.watched:
                scaler = self.scalers[name]
                scaler.boost = level >= SCALE_UP

    # -- request flow -----------------------------------------------------------------------------------------
    def _count_done(self) -> None:
        self.finished += 1
        if self._think_s >= 0.0 and self._released < self._n_requests:
            self._release(self._released, self.env.now + self._think_s)
        if self.finished == self._n_requests and not self.all_done.triggered:
            self.all_done.succeed()

    def _reject(self, req: SimRequest, reason: str) -> None:
        req.status, req.reject_reason = "rejected", reason
        self.recorder.record(req)
        self._count_done()

    def _on_first_token(self, req: SimRequest, t_s: float) -> None:
        """A first token sent at t_s (now: `Instance._first_token`)."""
        self.monitors[req.pool].ttft.add(t_s, t_s - req.arrival_s)

    def _on_leave(self, req: SimRequest) -> None:
        pool, now = self.pools[req.pool], self.env.now
        if req.status != "completed":  # a prefill pool hands the request to its decode pool
            self.env.process(self._handoff(req, pool))
        else:
            pool.completed += 1
            if req.output_tokens > 1:
                tpot = (req.finish_s - req.first_token_s) / (req.output_tokens - 1)
                self.monitors[req.pool].tpot.add(now, tpot)
                if req.pool in self.watched:
                    self.overload.observe_tpot(now, tpot)
            self.recorder.record(req)
            self._count_done()
        self._dispatch_held(pool, now)

    def _handoff(self, req: SimRequest, prefill: Pool):
        decode = self.pools[req.next_pool]
        self.in_transit[req.request_id] = req
        yield self.env.timeout(kv_handoff_s(prefill.pricing, decode.pricing, req.num_computed_tokens))
        del self.in_transit[req.request_id]
        req.prefill_pool, req.next_pool = prefill.name, ""  # (decodes where it lands)
        self._dispatch(req, decode, self.env.now)

    def _on_failure(self, pool: Pool, held: list[SimRequest]) -> None:
        """An instance of `pool` failed (sim/core/fleet/failures.py): each request it held goes back to the pool's
        router as a fresh arrival of its remaining work (marked `instance_failure`: failed over), or is rejected
        for that reason when the pool has no active instance left to take it."""
        now = self.env.now
        for req in held:
            req.reject_reason = "instance_failure"
            if pool.active:
                self._dispatch(req, pool, now)
            else:
                self._reject(req, "instance_failure")

    def _dispatch(self, req: SimRequest, pool: Pool, now: float, from_queue: bool = False) -> bool:
        """Route `req` to an active instance below the outstanding cap; hold it at the router in FIFO order when
        there is none (a central queue: with a cap of 1 and batch size 1 this is M/M/c)."""
        eligible = pool.active
        if self.max_outstanding is not None:
            eligible = [i for i in eligible if i.outstanding < self.max_outstanding]
        if not eligible or (pool.held and not from_queue):
            if not from_queue:
                pool.held.append(req)
            return False
        self.routers[pool.name].route(req, eligible).submit(req, now, self._wakes)
        return True

    def _dispatch_held(self, pool: Pool, now: float) -> None:
        while pool.held and self._dispatch(pool.held[0], pool, now, from_queue=True):
            pool.held.popleft()

    def _capacity_changed(self, pool: Pool) -> None:
        """An instance of `pool` became active: requests held at its router may go now."""
        self._dispatch_held(pool, self.env.now)

    def _admit(self, req: SimRequest, class_name: str, now: float) -> None:
        oc = self.overload.cfg
        level = self.overload.level
        if level >= BREAKER:
            return self._reject(req, "circuit_breaker")
        if level >= FALLBACK and oc.fallback_pool is not None:
            name = oc.fallback_pool
            req.fallback = True
        else:
            name = self.placement.choose(class_name, self.pools, self.monitors, now)
        pool = self.pools[name]
        self.monitors[name].arrivals.add(now, 1.0)
        limit, onward = pool.max_request_tokens, pool.hands_off_to
        if onward:
            limit = min(limit, self.pools[onward].max_request_tokens)
        if req.total_tokens > limit:
            return self._reject(req, "too_long")
        if oc.max_queue_per_instance is not None:
            queued = len(pool.held) + sum(len(i.policy.waiting) for i in pool.active)
            if queued >= oc.max_queue_per_instance * max(1, len(pool.active)):
                return self._reject(req, "queue_full")
        if onward and req.output_tokens > 1:  # the route decides the hand-off (SimRequest.handoff reads it)
            req.next_pool = onward
        self._dispatch(req, pool, now)

    def _release(self, i: int, at_s: float) -> None:
        """A closed-loop client sends request i at `at_s` (its arrival time is set now)."""
        self._released = i + 1
        self.last_send_s = at_s
        self.workload.arrival_s[i] = at_s
        self._chunk_hi = 0  # (the cached chunk holds the old time)
        ev = self.env.timeout(max(0.0, (at_s + self._overhead_s) - self.env.now))  # (a Python float: the clock stays one)
        ev.callbacks.append(self._arrive)

    def _load_chunk(self, i: int) -> None:
        """Make requests i .. i + ARRIVAL_CHUNK - 1 readable from the `_c_*` lists."""
        wl, hi = self.workload, min(i + ARRIVAL_CHUNK, self._n_requests)
        self._chunk_lo, self._chunk_hi = i, hi
        due = wl.arrival_s[i:hi] + self._overhead_s  # (per chunk: no second arrival column kept for the run)
        if self._released < hi:
            due[max(0, self._released - i):] = float("inf")  # (closed loop: not sent until a client frees)
        self._c_due = due.tolist()
        self._c_arrival = wl.arrival_s[i:hi].tolist()
        self._c_prompt = wl.prompt_tokens[i:hi].tolist()
        self._c_output = wl.output_tokens[i:hi].tolist()
        self._c_class = wl.request_class[i:hi].tolist()
        self._c_priority = wl.priority[i:hi].tolist()

    def _due(self, i: int) -> float:
        """When request i enters (arrival + front-end overhead)."""
        if not self._chunk_lo <= i < self._chunk_hi:
            self._load_chunk(i)
        return self._c_due[i - self._chunk_lo]

    def _schedule_arrival(self, now: float) -> None:
        """Requests enter at their arrival times (+ the front-end overhead): one timeout per distinct time, whose
        callback admits every request due then and schedules the next (a callback chain, not a process: this
        runs once per request)."""
        i = self._next_arrival
        if i < self._released:
            ev = self.env.timeout(max(0.0, self._due(i) - now))
            ev.callbacks.append(self._arrive)

    def _arrive(self, _event) -> None:
        now = self.env.now
        hashes, names = self.workload.prefix_hashes, self.workload.class_names
        n = self._n_requests
        i = self._next_arrival
        self._wakes = []  # idle instances given a request now: they plan once everything due now is in
        while i < n and self._due(i) <= now:
            j = i - self._chunk_lo
            cls = self._c_class[j]
            req = SimRequest(i, self._c_arrival[j], self._c_prompt[j], self._c_output[j], cls, self._c_priority[j],
                             None if hashes is None else hashes[i].tolist())  # (ints: routers walk them per instance)
            self.recorder.on_arrival(req)
            self._admit(req, names[cls], now)
            i += 1
        self._next_arrival = i
        wakes, self._wakes = self._wakes, None
        for inst in wakes:
            inst.wake(now)
        self._schedule_arrival(now)

    def live_requests(self):
        """Requests not yet ended: held at routers, waiting or running in instances, or moving between pools."""
        yield from self.in_transit.values()
        for pool in self.pools.values():
            yield from pool.held
            for inst in pool.instances:
                yield from inst.policy.waiting
                yield from inst.policy.running
