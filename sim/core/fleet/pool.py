"""A pool: identical instances (hardware + model + formats + parallelism) that start, serve and drain.

The pool owns its instances' lifecycle; autoscalers only say how many they want (`scale_to`). Scale-up uses a
pre-loaded warm replica when one is kept (`warm_spares`), else a cold start; scale-down drains the least-loaded
active instances, so no request in flight is ever dropped. A failure (`fail`, driven by `fleet/failures.py`)
stops an instance at once, hands its requests to the cluster and replaces it after the repair time.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import simpy

from inferplan.config.fleet import ColdStart, PoolPrice
from inferplan.config.run import PoolConfig, RunConfig, instance_bounds
from inferplan.errors import InputError
from sim.core.cost.factory import build_pool_pricing
from sim.core.fleet.billing import pool_bill, usd_per_instance_hour
from sim.core.fleet.failures import PoolFailures
from sim.core.instance.batching import make_policy, policy_class
from sim.core.instance.batching.base import BatchingPolicy
from sim.core.instance.engine import build_scheduler
from sim.core.instance.instance import Instance
from sim.core.instance.kv_cache import BlockManager, SharedKVTier
from sim.core.instance.request_state import SimRequest
from sim.core.outcome import PoolOutcome, PrefixCacheFacts, SchedulerFacts
from scenarios.rng import stream


class Pool:
    """Instances of one configuration, the router's hold queue, and per-pool counters."""

    def __init__(self, env: simpy.Environment, name: str, config: PoolConfig | None, run: RunConfig, *, on_finish,
                 on_first_token, hash_block_tokens: int = 512) -> None:
        # `config` is the config-layer record; the pool reads only its setup, resolved and typed at load
        # (sim/resolve.py): nothing is read from disk here and no block of the yaml reaches the pool as a dict.
        setup = run.setups[name]
        p: PoolConfig = setup.pool
        self.env, self.name, self.cfg, self.run = env, name, p, run
        self.hardware, self.model = setup.hardware, setup.model
        # Where this pool's requests go after their first token: its decode pool for a prefill-role pool, else ""
        # (the one place a pool's role becomes a route; the cluster puts it on each request it admits here).
        self.hands_off_to: str = (p.decode_pool or "") if p.role == "prefill" else ""
        self.where = f"scenario/{run.scenario.name}: pools.{name}"
        self.engine, self.batching = setup.engine, setup.batching  # (typed, checked at load)
        token_budget = setup.token_budget
        self.dp = setup.deployment.dp  # attention-DP ranks per instance (an engine's limits may be per rank)
        self.pricing = build_pool_pricing(self.model, self.hardware, p, run.cost, token_budget=token_budget,
                                          where=self.where, dep=setup.deployment, profile=setup.profile,
                                          generation=setup.generation, state_seqs=setup.max_running_seqs)
        self.memory, self.cost = self.pricing.memory, self.pricing.cost
        mem = self.memory
        # A decode-role pool receives prompts whose KV was computed elsewhere: it never schedules a prompt.
        limit = policy_class(self.batching.name).whole_prompt_limit(self.batching.kwargs())
        if (self.engine.generic and p.role != "decode" and limit is not None
                and limit < min(self.model.max_context_tokens, mem.blocks_per_rank * mem.block_size_tokens)):
            raise InputError(self.where, "batching.token_budget", f"{limit} is below the model's context "
                             f"({self.model.max_context_tokens}): long prompts could never be scheduled whole",
                             "raise token_budget or use batching=chunked_prefill")
        self.devices_per_instance = self.pricing.devices_per_instance
        # The on-demand price of one instance; its pricing (on demand, reserved, spot) discounts it when billed
        # (sim/core/fleet/billing.py `usd_per_instance_hour`).
        self.usd_per_hour = float(p.usd_per_hour if p.usd_per_hour is not None
                                  else self.hardware.usd_per_hour * self.devices_per_instance)
        self.price: PoolPrice = setup.price
        self.profile_choice: str = setup.profile_choice
        # Under attention DP a request's KV lives on one rank: the longest request is bounded by one rank's blocks.
        rank_tokens = mem.blocks_per_rank * mem.block_size_tokens
        self.max_request_tokens = min(self.model.max_context_tokens, rank_tokens)
        self.cold_start: ColdStart = setup.cold_start
        self._on_finish, self._on_first_token = on_finish, on_first_token
        self._hash_block_tokens = hash_block_tokens
        self.instances: list[Instance] = []
        self.stream_step_s: Callable[[], float] | None = None  # the decode pool's iterations (`streams_on`)
        self._active: list[Instance] | None = None  # `active`, kept until an instance changes state
        self.held: deque = deque()  # requests queued at the router (every instance at its cap)
        self.completed = 0
        self.min_instances, self.max_instances = instance_bounds(p)  # (checked at load: sim/config.py)
        self.warm_spares = 0
        self.shared_kv_tier: SharedKVTier | None = None  # one second KV tier for every instance (kv_tier2_shared)
        if p.kv_tier2_shared and p.kv_tier2_bytes > 0 and p.prefix_caching:
            self.shared_kv_tier = SharedKVTier(p.kv_tier2_bytes, max(1.0, mem.kv_bytes_per_token * hash_block_tokens))
        self._watchers: list[simpy.Event] = []  # woken when an instance becomes active or stops
        self.failures: PoolFailures | None = None  # the failure process, when the pool has one (set by the cluster)
        self.failure_log: list[tuple[float, int, str]] = []  # (t_s, instance index, cause) of each failure
        for _ in range(p.instances):
            self._new_instance().activate()

    # -- instances --------------------------------------------------------------------------------------------
    def _new_instance(self) -> Instance:
        p, mem, hw = self.cfg, self.memory, self.hardware
        kv = BlockManager(mem.num_blocks, mem.block_size_tokens, prefix_caching=p.prefix_caching,
                          hash_block_tokens=self._hash_block_tokens, kv_bytes_per_token=mem.kv_bytes_per_token,
                          tier2_capacity_bytes=p.kv_tier2_bytes,
                          tier2_bandwidth_bytes_per_s=p.kv_tier2_bandwidth_bytes_per_s or hw.host_link_bandwidth_bytes_per_s,
                          shared_tier=self.shared_kv_tier)
        policy: BatchingPolicy
        if self.engine.generic:  # (its parameters were checked at load: sim/resolve.py)
            policy = make_policy(self.batching.name, kv, self.batching.kwargs())
        else:  # the engine preset's scheduler over this pool's KV capacity and host link (checked at load)
            policy = build_scheduler(self.engine, kv, self.model.max_context_tokens,
                                     mem.num_blocks * mem.block_size_tokens, hw.host_link_bandwidth_bytes_per_s,
                                     mem.devices, self.dp)
        index = len(self.instances)
        inst = Instance(self.env, self.name, index, policy, kv, self.cost, self._on_finish,
                        self.run.fast_forward, on_first_token=self._on_first_token, on_stopped=self._on_stopped,
                        mtp_rng=stream(self.run.seed, f"mtp/{self.name}/{index}"), on_state=self._state_changed)
        inst.stream_step_s = self.stream_step_s
        self.instances.append(inst)
        return inst

    def streams_on(self, decode: Pool) -> None:
        """This prefill-role pool hands every request to `decode`, whose iterations stream its tokens: the front
        end's per-step terms (sim/core/instance/frontend.py) count those, not this pool's prefill iterations."""
        self.stream_step_s = decode.recent_step_s
        for inst in self.instances:
            inst.stream_step_s = self.stream_step_s

    def recent_step_s(self) -> float:
        """The mean recent iteration time (`Instance.step_avg_s`) of the active instances that have iterated; 0
        when none has."""
        times = [i.step_avg_s for i in self.active if i.step_avg_s > 0.0]
        return sum(times) / len(times) if times else 0.0

    def count(self, state: str) -> int:
        return sum(1 for i in self.instances if i.state == state)

    @property
    def active(self) -> list[Instance]:
        """The instances serving now, in index order (a list shared until an instance changes state: read it,
        do not change it). Read for every request routed."""
        if self._active is None:
            self._active = [i for i in self.instances if i.state == "active"]
        return self._active

    def _state_changed(self) -> None:
        self._active = None

    @property
    def provisioned(self) -> int:
        """Instances that are or will be serving (active + starting); the autoscalers' unit."""
        return sum(1 for i in self.instances if i.state in ("active", "starting"))

    def _start(self, inst: Instance, delay_s: float):
        yield self.env.timeout(delay_s)
        if inst.state == "starting":
            inst.activate()
            if self.failures is not None:
                self.failures.arm(inst)
            self._notify()
            self._on_capacity()

    def start_instances(self, k: int) -> None:
        """Bring up `k` more instances: warm spares first (switch-in only), cold starts for the rest."""
        weights = self.memory.weight_bytes
        for _ in range(k):
            spare = next((i for i in self.instances if i.state == "warm"), None)
            if spare is not None:
                spare.switch_in()
                self.env.process(self._start(spare, self.cold_start.warm_start_s))
                self._keep_spares()
                continue
            inst = self._new_instance()
            self.env.process(self._start(inst, self.cold_start.total_s(weights)))

    def _keep_spares(self) -> None:
        """Keep `warm_spares` pre-loaded replicas (weights in device memory, not serving; billed)."""
        missing = self.warm_spares - self.count("warm") - self.count("warming")
        for _ in range(max(0, missing)):
            inst = self._new_instance()
            inst.begin_warming()
            self.env.process(self._make_warm(inst))

    def _make_warm(self, inst: Instance):
        yield self.env.timeout(self.cold_start.total_s(self.memory.weight_bytes))
        inst.finish_warming()

    def set_warm_spares(self, k: int) -> None:
        self.warm_spares = max(0, int(k))
        self._keep_spares()

    def drain_instances(self, k: int) -> None:
        """Drain `k` instances: starting ones first (they hold nothing), then the least-loaded active ones."""
        for inst in [i for i in self.instances if i.state == "starting"][:k]:
            inst.drain()
            k -= 1
        for inst in sorted(self.active, key=lambda i: (i.outstanding, -i.index))[:max(0, k)]:
            inst.drain()

    def scale_to(self, target: int) -> int:
        """Aim for `target` provisioned instances within [min_instances, max_instances]; returns the target used."""
        target = max(self.min_instances, min(self.max_instances, int(target)))
        now = self.provisioned
        if target > now:
            self.start_instances(target - now)
        elif target < now:
            self.drain_instances(now - target)
        return target

    def replace_wave(self, instances: list[Instance], reload_s: float):
        """Rolling update of `instances`: drain each (nothing dropped), load the new weights, serve again."""
        for inst in instances:
            inst.drain()
        yield from self.wait_until(lambda: all(i.state == "stopped" for i in instances))
        for _ in instances:
            new = self._new_instance()
            self.env.process(self._start(new, reload_s))

    def fail(self, inst: Instance, repair_s: float, cause: str) -> None:
        """`inst` fails now (model in sim/core/fleet/failures.py): it stops at once, the cluster re-routes or
        rejects what it held (`on_failure`), and a serving instance is replaced `repair_s` later (a new instance
        through the cold start, or a warm spare switched in)."""
        serving = inst.state == "active"
        held = inst.fail()
        self.failure_log.append((float(self.env.now), inst.index, cause))
        if serving:
            if repair_s > 0.0:
                self.env.process(self._replace_after(repair_s))
            else:
                self.start_instances(1)
        if self.on_failure is not None:
            self.on_failure(self, held)

    def _replace_after(self, repair_s: float):
        yield self.env.timeout(repair_s)
        self.start_instances(1)

    def wait_until(self, condition):
        """Wait (in a SimPy process) until `condition()` holds; re-checked whenever an instance activates or stops."""
        while not condition():
            event = self.env.event()
            self._watchers.append(event)
            yield event

    def _notify(self) -> None:
        watchers, self._watchers = self._watchers, []
        for event in watchers:
            event.succeed()

    # -- the run's end --------------------------------------------------------------------------------------------
    def _cost_model(self) -> dict[str, Any]:
        """The cost model's description, with why its measured grid prices this pool (the grid's `source`)."""
        described = self.cost.describe()
        source = described.get("source")
        if isinstance(source, dict) and self.profile_choice:
            described["source"] = {**source, "choice": self.profile_choice}
        return described

    def outcome(self, end_s: float, granularity_s: float) -> PoolOutcome:
        """The pool's facts at the end of a run that ended at `end_s` (billed at `granularity_s`)."""
        p, instances = self.cfg, self.instances
        parts: dict[str, float] = {}
        for inst in instances:
            for k, v in inst.parts_s.items():
                parts[k] = parts.get(k, 0.0) + v
        engine = self.engine
        return PoolOutcome(
            name=self.name, hardware=self.hardware.name, model=self.model.name, role=p.role, tp=p.tp,
            weights_dtype=p.weights_dtype, kv_dtype=p.kv_dtype, engine="" if engine.generic else engine.name,
            engine_version=engine.engine_version or "", devices_per_instance=self.devices_per_instance,
            instances_start=p.instances, instances_launched=len(instances), min_instances=self.min_instances,
            max_instances=self.max_instances,
            instance_times_s=[(float(i.started_s), float(i.active_s), float(i.stopped_s)) for i in instances],
            on_demand_usd_per_instance_hour=self.usd_per_hour, usd_per_instance_hour=usd_per_instance_hour(self),
            price_kind=self.price.kind, price_discount=self.price.discount,
            bill=pool_bill(self, end_s, granularity_s), requests_completed=self.completed,
            kv_blocks_per_instance=self.memory.num_blocks, block_size_tokens=self.memory.block_size_tokens,
            weight_bytes=self.memory.weight_bytes, kv_capacity_bytes=self.memory.kv_capacity_bytes,
            iterations=sum(i.iterations for i in instances), time_breakdown_s=parts,
            hidden_communication_s=sum(i.hidden_s for i in instances),
            prefix_cache=PrefixCacheFacts(p.prefix_caching, sum(i.kv.hits_tokens for i in instances),
                                          sum(i.kv.tier2_hits_tokens for i in instances),
                                          sum(i.kv.lookups_tokens for i in instances)),
            cost_kind=self.cost.kind, cost_model=self._cost_model(), failures=list(self.failure_log),
            scheduler=self._scheduler_facts())

    def _scheduler_facts(self) -> SchedulerFacts:
        """The settings of the scheduler that ran (the first instance's policy; every instance's is the same), or
        of the batching parameters when the pool never had an instance."""
        if not self.instances:
            params = self.batching.kwargs()
            seqs, budget = params.get("max_num_seqs"), params.get("token_budget")
            chunked = {"continuous": False, "chunked_prefill": True}.get(self.batching.name)
        else:
            policy = self.instances[0].policy
            seqs = getattr(policy, "max_num_seqs", self.batching.kwargs().get("max_num_seqs"))
            budget = getattr(policy, "token_budget", self.batching.kwargs().get("token_budget"))
            chunked = getattr(policy, "chunked_prefill", None)
        return SchedulerFacts(None if seqs is None else int(seqs), None if budget is None else int(budget),
                              None if chunked is None else bool(chunked))

    # -- callbacks --------------------------------------------------------------------------------------------
    def _on_stopped(self, inst: Instance) -> None:
        self._notify()

    def _on_capacity(self) -> None:
        """An instance became active: the cluster may dispatch held requests (set by the cluster)."""
        if self.on_capacity is not None:
            self.on_capacity(self)

    on_capacity: Callable[[Pool], None] | None = None
    # An instance failed: the cluster re-routes or rejects the requests it held (set by the cluster).
    on_failure: Callable[[Pool, list[SimRequest]], None] | None = None
