"""Where a pool's KV capacity comes from, said in the run's summary: the tokens one instance holds and the rule that
sized them (the engine preset's own accounting, inferplan/config/engine_memory.py, or the pool's fraction), so a
reviewer sees which share of the device was taken and why."""
from __future__ import annotations

from inferplan.config.run import PoolSetup
from sim.core.outcome import PoolOutcome
from sim.results.schema import KvMemory

RULES = {"sglang_0_5_1": "SGLang 0.5.1's mem_fraction_static rule (reserved by device tier)",
         "sglang_0_5_6": "SGLang 0.5.6+'s mem_fraction_static rule (reserved from chunk and CUDA-graph sizes)"}


def basis(setup: PoolSetup) -> str:
    """One line: the share of each device the KV cache was sized from, and what came out of it first."""
    pool, engine = setup.pool, setup.engine
    util = pool.gpu_memory_utilization
    who = "the pool's gpu_memory_utilization" if engine.generic else f"{engine.name}"
    if engine.mem_fraction_rule:
        who = f"{engine.name}: {RULES.get(engine.mem_fraction_rule, engine.mem_fraction_rule)}"
    share = f"{util:.3g} of each device ({who})"
    if pool.memory_accounting == "static_fraction":
        return f"{share}, weights and KV only: activations and CUDA graphs outside it; less the runtime reserve"
    peak = "one forward's activations at the token budget"
    if pool.sampler_peak_bytes > 0:
        peak = (f"the profile run's peak (the larger of one forward's activations and its sampler, "
                f"{pool.sampler_peak_bytes / 1e9:.2f} GB per device)")
    text = f"{share}, less weights, {peak} and the runtime reserve"
    if pool.kv_free_memory_fraction < 1.0:
        text += f"; the KV cache takes {pool.kv_free_memory_fraction:.3g} of what is left"
    return text


def kv_memory(setup: PoolSetup, outcome: PoolOutcome) -> KvMemory:
    """The pool's KV capacity per instance and its basis (summary.json `kv_memory.<pool>`)."""
    pool = setup.pool
    return {"tokens_per_instance": int(outcome.kv_blocks_per_instance) * int(outcome.block_size_tokens),
            "gpu_memory_utilization": float(pool.gpu_memory_utilization),
            "accounting": str(pool.memory_accounting), "fraction_rule": setup.engine.mem_fraction_rule,
            "sampler_peak_bytes_per_device": float(pool.sampler_peak_bytes), "basis": basis(setup)}
