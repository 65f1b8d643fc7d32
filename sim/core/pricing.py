"""The engine's public pricing entry: iteration prices of a pool without a simulation, for programs that size a
fleet by arithmetic (the day plan's capacity, sim/plan/day/capacity.py), and single-op prices of the analytical
model, for the comparison of the cost model's op forms with measured tables (sim/validate/op_analytical.py:
`OpPricer` over a hardware datasheet, `Links` for collectives, `active_experts` for a MoE layer's routed experts).

`pool_steps(run, name)` builds the pool's cost model and memory plan exactly as the simulated pool does
(`sim.core.cost.factory.build_pool_pricing` over its resolved setup) and nothing else: no instances, no clock.
`PoolSteps.step_s(shape)` is the seconds of one iteration of that batch shape (`BatchShape`, re-exported here).
"""
from __future__ import annotations

from inferplan.config.run import RunConfig
from sim.core.cost.base import BatchShape, CostModel, one_prompt
from sim.core.cost.comm import Links
from sim.core.cost.experts import active_experts
from sim.core.cost.factory import build_pool_pricing
from sim.core.cost.pricer import OpPricer

__all__ = ["BatchShape", "Links", "OpPricer", "PoolSteps", "active_experts", "pool_steps"]


class PoolSteps:
    """One pool's step prices and the facts a capacity estimate needs beside them."""

    def __init__(self, name: str, cost: CostModel, kv_blocks: int, block_size_tokens: int,
                 devices_per_instance: int) -> None:
        self.name = name
        self._cost = cost
        self.tokens_per_step = float(cost.tokens_per_step)  # tokens a decode step emits (MTP: 1 + accepted drafts)
        self.kv_blocks = kv_blocks                          # KV blocks per instance
        self.block_size_tokens = block_size_tokens
        self.devices_per_instance = devices_per_instance

    def step_s(self, shape: BatchShape) -> float:
        """Seconds of one iteration of `shape` (> 0)."""
        return self._cost.step_cost(shape).total_s

    def prefill_alone_s(self, tokens: int) -> float:
        """Seconds of one prefill of a `tokens`-token prompt alone (the front end's per-prefill multiplier)."""
        return self._cost.step_cost(one_prompt(tokens)).total_s

    def price_steps(self, shapes: list[BatchShape]) -> list[float]:
        """`step_s` of each shape, in order."""
        return [self._cost.step_cost(s).total_s for s in shapes]


def pool_steps(run: RunConfig, name: str) -> PoolSteps:
    """Pool `name` of `run` priced as its simulated instances are (an `InputError` if it does not fit)."""
    setup = run.setups[name]
    pricing = build_pool_pricing(setup.model, setup.hardware, setup.pool, run.cost, token_budget=setup.token_budget,
                                 where=f"scenario/{run.scenario.name}: pools.{name}", dep=setup.deployment,
                                 profile=setup.profile, generation=setup.generation,
                                 state_seqs=setup.max_running_seqs)
    mem = pricing.memory
    return PoolSteps(name, pricing.cost, mem.num_blocks, mem.block_size_tokens, pricing.devices_per_instance)
