"""Capacity arithmetic: what one prefill unit and one decode unit can carry, priced by the simulator's own cost
model (through `sim.core.pricing`, the pools' `deployment:` presets), and the fewest units a window's traffic needs.

- Prefill: the sampled requests' uncached prompt tokens (their cached tokens as context) packed into iterations of
  the pool's `token_budget` (the layout's per-GPU batch times the unit's GPUs), chunked as `chunked_prefill`
  chunks them; capacity = tokens / total step time.
- Decode: the largest batch (sequences per unit, at most `max_num_seqs` and what the KV cache holds at the
  traffic's mean context) whose step time per emitted token (MTP included) is within the TPOT target;
  capacity = batch x tokens per step / step time.
- Units for a window = ceil(demand / capacity), demand at the window's mean rate (utilisation <= 1). Queueing is
  left to the simulation, which verifies the count and raises it when a target is missed.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from inferplan.errors import InputError
from inferplan.config.run import RunConfig
from sim.core.pricing import BatchShape, PoolSteps, pool_steps
from sim.plan.day.traffic import RequestStats


@dataclass(frozen=True)
class UnitCapacity:
    """Per-unit capacities and what they were computed at."""

    prefill_new_tokens_per_s: float        # uncached prompt tokens computed per second by one prefill unit
    prefill_input_tokens_per_s: float      # the same with the cache hits those prompts read (per unit)
    prefill_step_s: float                  # mean iteration time at the full token budget
    prefill_token_budget: int
    decode_batch_seqs: int                 # sequences per decode unit at the TPOT target
    decode_step_s: float
    decode_tpot_s: float                   # step time per emitted token at that batch
    decode_output_tokens_per_s: float      # per unit
    decode_tokens_per_step: float          # MTP: 1 + accepted drafts
    decode_batch_limit: str                # tpot | max_num_seqs | kv_cache
    prefill_nodes_per_unit: float
    decode_nodes_per_unit: float
    usd_per_node_hour: float

    def to_json(self) -> dict:
        return asdict(self)


def _pools(run: RunConfig) -> tuple[PoolSteps, PoolSteps]:
    """The prefill and the decode pool's step prices."""
    roles = {p.role: name for name, p in run.pools.items()}
    if "prefill" not in roles or "decode" not in roles:
        raise InputError(f"scenario/{run.scenario.name}", "pools", "the day plan needs a prefill and a decode pool",
                         "use scenario=deepseek_v3_day")
    return pool_steps(run, roles["prefill"]), pool_steps(run, roles["decode"])


def _param(run: RunConfig, pool: PoolSteps, key: str, default: int) -> int:
    """A batching parameter of the pool (its resolved setup's)."""
    return int(run.setups[pool.name].batching.param(key, default))


def prefill_capacity(run: RunConfig, pool: PoolSteps, stats: RequestStats) -> tuple[float, float, float]:
    """(new tokens/s, input tokens/s incl. hits, mean step s) of one unit over the sample packed into full steps."""
    budget = _param(run, pool, "token_budget", 8192)
    max_seqs = _param(run, pool, "max_num_seqs", 1 << 30)
    total_s = new_total = input_total = 0.0
    steps = 0
    chunks: list[tuple[int, int]] = []   # (q new tokens this step, c context before them)
    room = budget

    def flush() -> None:
        nonlocal total_s, steps, room
        shape = BatchShape(prefill_seqs=len(chunks), prefill_tokens=sum(q for q, _ in chunks),
                           prefill_q_ctx_sum=sum(q * c for q, c in chunks),
                           prefill_q_sq_sum=sum(q * (q + 1) // 2 for q, _ in chunks),
                           prefill_kv_tokens=sum(q + c for q, c in chunks), sampled_seqs=len(chunks))
        total_s += pool.step_s(shape)
        steps += 1
        chunks.clear()
        room = budget

    for new, hit in zip(stats.new_tokens.tolist(), stats.hit_tokens.tolist()):
        new_total += new
        input_total += new + hit
        done = 0
        while done < new:
            q = min(new - done, room)
            chunks.append((q, hit + done))
            done += q
            room -= q
            if room == 0 or len(chunks) >= max_seqs:
                flush()
    if chunks:
        flush()
    return new_total / total_s, input_total / total_s, total_s / steps


def decode_batch(run: RunConfig, pool: PoolSteps, context_tokens: float,
                 tpot_target_s: float) -> tuple[int, float, str]:
    """The largest decode batch within the TPOT target, the memory and `max_num_seqs`: (seqs, step s, limit)."""
    per_step = pool.tokens_per_step
    max_seqs = _param(run, pool, "max_num_seqs", 1 << 30)
    kv_seqs = int(pool.kv_blocks * pool.block_size_tokens // max(1.0, context_tokens))
    cap, limit = (max_seqs, "max_num_seqs") if max_seqs <= kv_seqs else (kv_seqs, "kv_cache")

    def step_s(b: int) -> float:
        return pool.step_s(BatchShape(decode_seqs=b, decode_ctx_sum=int(b * context_tokens), sampled_seqs=b))

    if step_s(cap) / per_step <= tpot_target_s:
        return cap, step_s(cap), limit
    lo, hi = 0, cap                       # step time grows with the batch: bisect the largest b within target
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if step_s(mid) / per_step <= tpot_target_s else (lo, mid)
    if lo == 0:
        raise InputError(f"scenario/{run.scenario.name}", "slo.tpot_p99_s",
                         f"even one sequence takes {step_s(1) / per_step:.4g} s per token", "raise the TPOT target")
    return lo, step_s(lo), "tpot"


def unit_capacity(run: RunConfig, stats: RequestStats) -> UnitCapacity:
    prefill, decode = _pools(run)
    new_s, input_s, step = prefill_capacity(run, prefill, stats)
    tpot_target = float(run.slo.tpot_p99_s)
    batch, dstep, limit = decode_batch(run, decode, stats.kv_tokens_per_output_token, tpot_target)
    per_step = decode.tokens_per_step
    hardware = run.setups[prefill.name].hardware
    node = float(hardware.devices_per_node)
    return UnitCapacity(
        prefill_new_tokens_per_s=new_s, prefill_input_tokens_per_s=input_s, prefill_step_s=step,
        prefill_token_budget=_param(run, prefill, "token_budget", 0), decode_batch_seqs=batch,
        decode_step_s=dstep, decode_tpot_s=dstep / per_step,
        decode_output_tokens_per_s=batch * per_step / dstep, decode_tokens_per_step=per_step,
        decode_batch_limit=limit, prefill_nodes_per_unit=prefill.devices_per_instance / node,
        decode_nodes_per_unit=decode.devices_per_instance / node,
        usd_per_node_hour=hardware.usd_per_hour * node)


def units_needed(cap: UnitCapacity, stats: RequestStats, requests_per_s: float) -> tuple[int, int]:
    """(prefill units, decode units) whose capacity covers a window's mean demand (at least one of each)."""
    new_tokens_per_s = requests_per_s * (stats.prompt_tokens - stats.cached_tokens)
    output_tokens_per_s = requests_per_s * stats.output_tokens
    return (max(1, math.ceil(new_tokens_per_s / cap.prefill_new_tokens_per_s - 1e-9)),
            max(1, math.ceil(output_tokens_per_s / cap.decode_output_tokens_per_s - 1e-9)))
