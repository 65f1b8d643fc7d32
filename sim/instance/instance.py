"""One serving instance as a SimPy process: form a batch, price it, wait its time, apply it, repeat."""
from __future__ import annotations

import simpy

from sim.cost.base import PARTS, CostModel, StepCost
from sim.instance.batch import ScheduledBatch
from sim.instance.batching import BatchingPolicy
from sim.instance.kv_cache import BlockManager
from sim.instance.request_state import SimRequest


class Instance:
    """A model replica on `tp` devices with its own scheduler, KV cache and cost model.

    `on_finish(req)` is called for each request as it completes. Counters (`busy_s`, `parts_s`, `iterations`)
    feed the metrics; `outstanding` (waiting + running) feeds the routers.
    """

    def __init__(self, env: simpy.Environment, pool: str, index: int, policy: BatchingPolicy, kv: BlockManager,
                 cost: CostModel, on_finish) -> None:
        self.env, self.pool, self.index = env, pool, index
        self.policy, self.kv, self.cost = policy, kv, cost
        self.on_finish = on_finish
        self.busy_s = 0.0
        self.iterations = 0
        self.parts_s = dict.fromkeys(PARTS, 0.0)
        self.last_step_end_s = 0.0
        self.clock_ok = True
        self._wakeup: simpy.Event | None = None
        self.process = env.process(self._run())

    @property
    def outstanding(self) -> int:
        return len(self.policy.waiting) + len(self.policy.running)

    def submit(self, req: SimRequest) -> None:
        req.pool, req.instance, req.enqueued_s = self.pool, self.index, float(self.env.now)
        self.policy.add_request(req, self.env.now)
        if self._wakeup is not None and not self._wakeup.triggered:
            self._wakeup.succeed()

    def _run(self):
        env = self.env
        while True:
            out = self.policy.schedule(env.now)
            if out is None or not isinstance(out, ScheduledBatch):
                self._wakeup = env.event()
                if out is None:
                    yield self._wakeup
                else:
                    yield self._wakeup | env.timeout(max(0.0, out - env.now))
                self._wakeup = None
                continue
            cost = self.cost.step_cost(out.shape)
            if out.load_s:
                parts = dict(cost.parts)
                parts["communication"] += out.load_s
                cost = StepCost(cost.total_s + out.load_s, parts)
            start = env.now
            yield env.timeout(cost.total_s)
            if env.now < start or start < self.last_step_end_s:
                self.clock_ok = False
            self.last_step_end_s = env.now
            self.busy_s += cost.total_s
            self.iterations += 1
            for k, v in cost.parts.items():
                self.parts_s[k] += v
            for req in self.policy.update_from_output(out, env.now):
                self.on_finish(req)
