"""Builds a pool's pricing: its cost model and memory plan from the model, hardware, formats and deployment.

The cluster calls `build_pool_pricing` once per pool; everything about how an iteration of that pool is priced
(and how much KV it can hold) is decided here, from `conf/cost` and the pool's config.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from calibrate.profile import load_profile
from inferplan.errors import InputError
from inferplan.specs import HardwareSpec, ModelSpec
from sim.config import CostConfig, PoolConfig
from sim.cost.base import CostModel
from sim.cost.constant import SyntheticCostModel
from sim.cost.memory import MemoryPlan, plan_memory
from sim.cost.pricer import OpPricer
from sim.cost.roofline import LayeredCostModel

PROFILES_DIR = Path(__file__).resolve().parent.parent.parent / "calibrate" / "profiles"


def resolve_profile(setting: str, hw: HardwareSpec):
    """The measured profile a pool uses: `auto` takes calibrate/profiles/<hardware>.parquet if it exists."""
    if setting == "analytical":
        return None
    if setting == "auto":
        path = PROFILES_DIR / f"{hw.name}.parquet"
        return load_profile(path, expected_hardware=hw.name) if path.is_file() else None
    return load_profile(setting, expected_hardware=hw.name)


@dataclass
class PoolPricing:
    """What the simulator needs to price one pool: the iteration cost model, the memory plan, and how many
    devices one instance occupies (for billing and energy)."""

    cost: CostModel
    memory: MemoryPlan
    devices_per_instance: int

    def kv_transfer_s(self, tokens: int, link_bytes_per_s: float, latency_s: float = 0.0) -> float:
        """Seconds to move `tokens` tokens of this pool's KV cache over a link (prefill -> decode hand-off)."""
        return latency_s + tokens * self.memory.kv_bytes_per_token / link_bytes_per_s


def build_pool_pricing(model: ModelSpec, hw: HardwareSpec, p: PoolConfig, cost_cfg: CostConfig, *,
                       token_budget: int, where: str) -> PoolPricing:
    mem = plan_memory(model, hw, tp=p.tp, weights_dtype=p.weights_dtype, kv_dtype=p.kv_dtype,
                      block_size_tokens=p.block_size_tokens, gpu_memory_utilization=p.gpu_memory_utilization,
                      token_budget=token_budget, fixed_reserve_bytes=p.runtime_reserve_bytes)
    if p.num_gpu_blocks_override is not None:
        mem = dataclasses.replace(mem, num_blocks=int(p.num_gpu_blocks_override))
    if not mem.fits:
        raise InputError(where, "tp", f"{model.name} ({mem.weight_bytes / 1e9:.1f} GB of {p.weights_dtype} weights) "
                         f"does not fit {p.tp} x {hw.name} ({mem.usable_bytes / 1e9:.1f} GB usable) with room for KV",
                         "raise tp, use a smaller weights_dtype, or pick larger hardware")
    if cost_cfg.kind == "constant":
        return PoolPricing(SyntheticCostModel(cost_cfg.step_time_s, cost_cfg.per_token_s), mem, p.tp)
    profile = resolve_profile(cost_cfg.profile, hw)
    try:
        pricer = OpPricer(hw, cost_cfg.efficiency, cost_cfg.launch_s, profile, cost_cfg.efficiency_scale)
    except ValueError as err:
        raise InputError("conf/cost", "efficiency_scale", str(err), "give positive multipliers") from None
    cost = LayeredCostModel(model, hw, pricer, tp=p.tp, weights_dtype=p.weights_dtype, kv_dtype=p.kv_dtype,
                            step_overhead_s=cost_cfg.step_overhead_s, link_efficiency=cost_cfg.link_efficiency)
    return PoolPricing(cost, mem, p.tp)
