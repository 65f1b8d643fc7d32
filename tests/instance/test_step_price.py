"""The instance adds nothing to an iteration's price: every second and part it accounts is what the cost model's
`step_cost` returned for the scheduled iteration, KV loads (swaps) and host work under each overlap mode
included (`sim.core.cost.host_overlap` prices both, once)."""
from __future__ import annotations

import pytest
import simpy

from sim.core.cost.base import PARTS, BatchShape, StepCost
from sim.core.cost.constant import SyntheticCostModel
from sim.core.instance.batching.engine import EngineBatching
from sim.core.instance.instance import Instance
from sim.core.instance.kv_cache import BlockManager
from sim.core.instance.request_state import SimRequest


class Recorded:
    """A synthetic cost model (10 ms + 1 ms per token, all host overhead) recording what each call returned."""
    draft_tokens = 0
    acceptance: tuple = ()

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.model = SyntheticCostModel(0.010, 0.001)
        self.calls: list[tuple[float, float, int, bool]] = []
        self.costs: list[StepCost] = []
        self.starts_s: list[float] = []

    def step_cost(self, b: BatchShape, load_s: float = 0.0, host_s: float = 0.0, overlap: int = 0,
                  back_to_back: bool = False) -> StepCost:
        cost = self.model.step_cost(b, load_s, host_s, overlap, back_to_back)
        self.calls.append((load_s, host_s, overlap, back_to_back))
        self.costs.append(cost)
        self.starts_s.append(self.env.now)
        return cost


def run(overlap: str):
    """Two requests on 3 KV blocks with swap preemption (a swap in is KV loaded before an iteration) and 2 ms of
    host work per sequence; a third arrives after an idle gap."""
    env = simpy.Environment()
    kv = BlockManager(3, 16, kv_bytes_per_token=1e5)
    policy = EngineBatching(kv, preemption="swap", swap_bandwidth_bytes_per_s=1e9, swap_space_bytes=4 * 2**30,
                            max_num_seqs=8, max_num_batched_tokens=1024, chunked_prefill=False,
                            iteration="prefill_priority", host_per_seq_s=0.002, overlap=overlap)
    cost = Recorded(env)
    inst = Instance(env, "p", 0, policy, kv, cost, lambda r: None, fast_forward=False)
    inst.state = "active"
    for i in range(2):
        inst.submit(SimRequest(i, 0.0, 16, 10), 0.0)
    env.process(_later(env, inst, SimRequest(2, 10.0, 8, 3)))
    env.run()
    return inst, cost


def _later(env, inst, req):
    yield env.timeout(req.arrival_s)
    inst.submit(req, env.now)


@pytest.mark.parametrize("overlap", ["none", "output", "all"])
def test_the_instance_accounts_exactly_what_the_cost_model_priced(overlap: str):
    inst, cost = run(overlap)
    assert any(load_s > 0 for load_s, *_ in cost.calls)  # (a swap's KV load was priced into an iteration)
    assert all(host_s > 0 for _, host_s, *_ in cost.calls)
    assert inst.iterations == len(cost.costs)
    assert inst.busy_s == pytest.approx(sum(c.total_s for c in cost.costs), rel=1e-12)
    accounted = inst.parts_s
    for k in PARTS:
        assert accounted[k] == pytest.approx(sum(c.parts[k] for c in cost.costs), rel=1e-12, abs=1e-15)


def test_back_to_back_is_the_only_fact_the_instance_passes():
    """An iteration is back to back when it starts exactly when the previous one ended: not the first, nor the
    first after the idle gap."""
    _, cost = run("all")
    flags = [b2b for *_, b2b in cost.calls]
    ends_s = [start + c.total_s for start, c in zip(cost.starts_s, cost.costs)]
    assert flags == [i > 0 and cost.starts_s[i] == ends_s[i - 1] for i in range(len(flags))]
    assert not flags[0] and all(flags[1:4]) and cost.starts_s.count(10.0) == 1 and not flags[cost.starts_s.index(10.0)]
