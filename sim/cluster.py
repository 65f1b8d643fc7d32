"""Builds the fleet from a `RunConfig` and feeds it the workload: pools of instances, routing, admission.

Data flow: workload rows -> arrival process (+ front-end overhead) -> admission checks -> router -> instance.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import simpy

from inferplan.errors import InputError
from inferplan.specs import HardwareSpec, ModelSpec, load_hardware, load_model
from scenarios.workload import Workload
from sim.config import PoolConfig, RunConfig
from sim.cost.base import CostModel
from sim.cost.factory import build_pool_pricing
from sim.cost.memory import MemoryPlan
from sim.instance.batching import make_policy
from sim.instance.instance import Instance
from sim.instance.kv_cache import BlockManager
from sim.instance.request_state import SimRequest
from sim.router import make_router

@dataclass
class Pool:
    name: str
    cfg: PoolConfig
    hardware: HardwareSpec
    model: ModelSpec
    memory: MemoryPlan
    cost: CostModel
    usd_per_hour: float
    instances: list[Instance]
    max_request_tokens: int
    devices_per_instance: int = 1
    completed: int = 0
    held: deque = field(default_factory=deque)  # requests queued at the router (all instances at their cap)


def build_pool(env: simpy.Environment, name: str, p: PoolConfig, run: RunConfig, on_finish,
               hash_block_tokens: int = 512) -> Pool:
    hw, model = load_hardware(p.hardware), load_model(p.model)
    batching = {**run.batching, **(p.batching or {})}
    token_budget = int(batching.get("token_budget", 8192))
    where = f"scenario/{run.scenario.name}: pools.{name}"
    pricing = build_pool_pricing(model, hw, p, run.cost, token_budget=token_budget, where=where)
    mem, cost = pricing.memory, pricing.cost
    if run.batching_name == "continuous" and token_budget < min(model.max_context_tokens, mem.num_blocks * mem.block_size_tokens):
        raise InputError(where, "batching.token_budget", f"{token_budget} is below the model's context "
                         f"({model.max_context_tokens}): long prompts could never be scheduled whole",
                         "raise token_budget or use batching=chunked_prefill")
    params = {k: v for k, v in batching.items()}
    instances = []
    for i in range(p.instances):
        kv = BlockManager(mem.num_blocks, mem.block_size_tokens, prefix_caching=p.prefix_caching,
                          hash_block_tokens=hash_block_tokens, kv_bytes_per_token=mem.kv_bytes_per_token,
                          tier2_capacity_bytes=p.kv_tier2_bytes,
                          tier2_bandwidth_bytes_per_s=p.kv_tier2_bandwidth_bytes_per_s or hw.host_link_bandwidth_bytes_per_s)
        try:
            policy = make_policy(run.batching_name, kv, params)
        except (TypeError, ValueError) as err:
            raise InputError(f"conf/batching/{run.batching_name}.yaml", "parameters", str(err), "remove or rename the key") from None
        instances.append(Instance(env, name, i, policy, kv, cost, on_finish, run.fast_forward))
    usd = p.usd_per_hour if p.usd_per_hour is not None else hw.usd_per_hour * p.tp
    max_tokens = min(model.max_context_tokens, mem.num_blocks * mem.block_size_tokens)
    return Pool(name, p, hw, model, mem, cost, float(usd), instances, max_tokens, pricing.devices_per_instance)


class Cluster:
    """The pools, the router and the arrival process of one run."""

    def __init__(self, env: simpy.Environment, run: RunConfig, workload: Workload, recorder) -> None:
        self.env, self.run, self.workload, self.recorder = env, run, workload, recorder
        self.pools = {name: build_pool(env, name, p, run, self._on_finish, workload.hash_block_tokens)
                      for name, p in run.pools.items()}
        params = dict(run.router)
        cap = params.pop("max_outstanding_per_instance", None)
        self.max_outstanding = None if cap is None else int(cap)
        try:
            self.router = make_router(run.router_name, params)
        except (TypeError, ValueError) as err:
            raise InputError(f"conf/router/{run.router_name}.yaml", "parameters", str(err), "remove or rename the key") from None
        self.arrived = 0
        self.finished = 0  # completed or rejected
        self.all_done = env.event()
        env.process(self._arrivals())

    def _on_finish(self, req: SimRequest) -> None:
        pool = self.pools[req.pool]
        pool.completed += 1
        self.recorder.record(req)
        self._count_done()
        while pool.held and self._dispatch(pool.held[0], pool, from_queue=True):
            pool.held.popleft()

    def _dispatch(self, req: SimRequest, pool: Pool, from_queue: bool = False) -> bool:
        """Route `req` to an instance below the outstanding cap (all instances when there is no cap); hold it
        at the router in FIFO order otherwise (a central queue: with a cap of 1 and batch size 1 this is M/M/c)."""
        eligible = pool.instances
        if self.max_outstanding is not None:
            eligible = [i for i in pool.instances if i.outstanding < self.max_outstanding]
        if not eligible or (pool.held and not from_queue):
            if not from_queue:
                pool.held.append(req)
            return False
        self.router.route(req, eligible).submit(req)
        return True

    def _count_done(self) -> None:
        self.finished += 1
        if self.finished == len(self.workload) and not self.all_done.triggered:
            self.all_done.succeed()

    def _reject(self, req: SimRequest, reason: str) -> None:
        req.status, req.reject_reason = "rejected", reason
        self.recorder.record(req)
        self._count_done()

    def _arrivals(self):
        wl, env = self.workload, self.env
        overhead = self.run.scenario.frontend_overhead_s
        arrival, prompt, output = wl.arrival_s, wl.prompt_tokens, wl.output_tokens
        cls, prio, hashes = wl.request_class, wl.priority, wl.prefix_hashes
        pool = next(iter(self.pools.values()))  # NOTE: one pool until placement policies land (fleet issue)
        for i in range(len(wl)):
            t = float(arrival[i]) + overhead
            if t > env.now:
                yield env.timeout(t - env.now)
            req = SimRequest(i, float(arrival[i]), int(prompt[i]), int(output[i]), int(cls[i]), int(prio[i]),
                             None if hashes is None else hashes[i])
            self.arrived += 1
            self.recorder.on_arrival(req)
            if req.total_tokens > pool.max_request_tokens:
                self._reject(req, "too_long")
                continue
            if not pool.instances:
                self._reject(req, "no_capacity")
                continue
            self._dispatch(req, pool)

    def live_requests(self):
        """Requests still inside instances (waiting or running)."""
        for pool in self.pools.values():
            yield from pool.held
            for inst in pool.instances:
                yield from inst.policy.waiting
                yield from inst.policy.running
