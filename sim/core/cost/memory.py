"""Memory plan of one instance: weights and activation reserve per device, and the KV cache the rest holds.

Every device of a stage holds the same pieces (`sim.core.cost.weights`), so the plan is computed per stage for one
device: usable = memory x `gpu_memory_utilization`; free = (usable - weights - activation reserve) x `kv_free_fraction`
(1; TensorRT-LLM 0.9). The activation reserve is the larger of one forward's activations and the engine's
profile-run sampler peak (vLLM V1), plus the runtime's fixed reserve; an engine whose fraction leaves its activations
outside the usable share (SGLang's `mem_fraction_static`) has only the fixed reserve taken
(inferplan/config/engine_memory.py). KV blocks of one
DP rank = the smallest, over stages, of free / (KV bytes per token on that device x block size) (a token's KV
lives on every stage, on the tp devices of one DP rank). The instance holds `dp` ranks' blocks; the simulator's
block manager treats them as one pool (an approximation: fragmentation across ranks is ignored). All totals in
`MemoryPlan` are per instance (all its devices); `per_device` gives the per-stage view.

Sliding-window layers keep at most `window` tokens of KV per sequence (the engines free the blocks that slide out),
so a token's KV grows only the full-attention layers' caches: the per-token bytes count those layers alone, and
the windowed layers' KV is a per-sequence constant (window + one block of tokens), held for `state_seqs`
sequences out of the free memory before the blocks are counted (0: not reserved, an undercount of window / length
of the KV of those layers per sequence). Linear-attention layers (Gated DeltaNet) keep no KV at all: each sequence
holds a fixed state per layer (`weights.linear_state_bytes`: the recurrent state and the convolution's inputs),
held for the same `state_seqs` sequences (the engines allocate one state slot per running sequence).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from inferplan.specs import HardwareSpec, ModelSpec
from inferplan.config.deployment import Deployment
from sim.core.cost.layout import Layout
from sim.core.cost.weights import (device_host_weight_bytes, device_weight_bytes, kv_layer_bytes, linear_state_bytes,
                                  stage_layers)


@dataclass(frozen=True)
class DeviceMemory:
    """One device of one pipeline stage."""

    stage: int
    usable_bytes: float
    weight_bytes: dict[str, float]        # by component
    activation_reserve_bytes: float
    kv_bytes_per_token: float
    host_weight_bytes: float              # cold experts in host memory

    @property
    def free_bytes(self) -> float:
        return self.usable_bytes - sum(self.weight_bytes.values(), 0.0) - self.activation_reserve_bytes


@dataclass(frozen=True)
class MemoryPlan:
    """How an instance's memory is split. Totals are over its `devices`; `kv_bytes_per_token` is what one token's
    KV occupies across the instance (its DP rank's devices, every stage); `kv_capacity_bytes` the bytes the KV
    blocks hold; `kv_wire_bytes_per_token` one copy of a token's KV (what a prefill -> decode hand-off moves)."""

    device_bytes: float
    usable_bytes: float
    weight_bytes: float
    activation_reserve_bytes: float
    kv_capacity_bytes: float
    kv_bytes_per_token: float
    block_size_tokens: int
    num_blocks: int
    devices: int = 1
    host_weight_bytes: float = 0.0
    kv_wire_bytes_per_token: float = 0.0
    per_device: tuple[DeviceMemory, ...] = ()
    problem: str = ""                      # why the deployment does not fit ("" when it does)
    dp: int = 1                            # DP ranks whose KV blocks `num_blocks` pools

    @property
    def fits(self) -> bool:
        return self.num_blocks > 0 and not self.problem

    @property
    def blocks_per_rank(self) -> int:
        """KV blocks one DP rank holds: the most one request can use (its KV cannot span ranks)."""
        return self.num_blocks // self.dp


def activation_reserve_bytes(m: ModelSpec, lay: Layout, token_budget: int) -> float:
    """Peak activations of one forward on one device: a DP rank's share of `token_budget` tokens (the scheduler is
    assumed to balance tokens over ranks) through hidden states, QKV and the MLP (or routed experts') intermediate,
    bf16. Under EP a device's expert rows average the same tokens x top-k / tp as without."""
    tokens = math.ceil(token_budget / lay.dp)
    e = m.moe
    inter = m.intermediate_size if e is None else max(m.intermediate_size, e.expert_intermediate_size * e.top_k)
    return tokens * (4 * m.hidden_size + 2 * inter / lay.tp + (m.num_heads * m.head_dim * 3) / lay.tp) * 2.0


def sliding_layers_in(m: ModelSpec, start: int, count: int) -> int:
    """How many of layers start .. start + count - 1 attend through a sliding window (0 without one)."""
    if not m.sliding_window_tokens:
        return 0
    return sum(1 for i in m.sliding_window_layers if start <= i < start + count)


def linear_layers_in(m: ModelSpec, start: int, count: int) -> int:
    """How many of layers start .. start + count - 1 are linear attention (0 without any)."""
    la = m.linear_attention
    if la is None:
        return 0
    return sum(1 for i in la.layers if start <= i < start + count)


def _gb(x: float) -> str:
    return f"{x / 1e9:.1f} GB"


def plan_memory(m: ModelSpec, hw: HardwareSpec, dep: Deployment, lay: Layout, *, kv_dtype: str,
                block_size_tokens: int, gpu_memory_utilization: float, token_budget: int,
                fixed_reserve_bytes: float, kv_free_fraction: float = 1.0, state_seqs: int = 0,
                sampler_peak_bytes: float = 0.0, activations_in_usable: bool = True) -> MemoryPlan:
    """The instance's memory plan. `kv_free_fraction` < 1: the KV cache takes that share of what weights and
    activations leave of the usable memory (TensorRT-LLM `free_gpu_memory_fraction`), not all of it.
    `state_seqs`: the sequences whose sliding-window layers' KV and linear-attention state are held as constants
    (module doc). `sampler_peak_bytes`: per device, the engine's profile-run sampler peak (the activation reserve
    is the larger of it and one forward's); `activations_in_usable` False: neither comes out of the usable share."""
    usable = hw.memory_bytes * gpu_memory_utilization
    peak = max(activation_reserve_bytes(m, lay, token_budget), sampler_peak_bytes) if activations_in_usable else 0.0
    reserve = peak + fixed_reserve_bytes
    per_layer_kv = kv_layer_bytes(m, dep, kv_dtype, lay.tp)
    window_tokens = (m.sliding_window_tokens + block_size_tokens) * state_seqs / lay.dp
    seq_state_bytes = linear_state_bytes(m, lay.tp) * state_seqs / lay.dp
    devices, blocks_per_rank, problem, start = [], None, "", 0
    for i, st in enumerate(lay.stages):
        dense, moe = stage_layers(m, dep, st)
        windowed = sliding_layers_in(m, start, st.dense_layers + st.moe_layers)
        linear = linear_layers_in(m, start, st.dense_layers + st.moe_layers)
        start += st.dense_layers + st.moe_layers
        held = windowed * per_layer_kv * window_tokens
        if linear:
            held += linear * seq_state_bytes
        d = DeviceMemory(i, usable, device_weight_bytes(m, dep, lay, st), reserve + held,
                         (dense + moe - windowed - linear) * per_layer_kv,
                         device_host_weight_bytes(m, dep, lay, st))
        devices.append(d)
        free = d.free_bytes if kv_free_fraction == 1.0 else d.free_bytes * kv_free_fraction
        blocks = max(0, int(free // (d.kv_bytes_per_token * block_size_tokens)))
        if blocks == 0 and not problem:
            w = d.weight_bytes
            top = ", ".join(f"{k} {_gb(v)}" for k, v in sorted(w.items(), key=lambda kv: -kv[1])[:3])
            where = f"stage {i} of {lay.pp}" if lay.pp > 1 else "each"
            problem = (f"{where} {hw.name} needs {_gb(sum(w.values(), 0.0))} of weights ({top}) + {_gb(reserve)} "
                       f"activation/runtime reserve, leaving {_gb(max(0.0, d.free_bytes))} of {_gb(usable)} usable "
                       f"for KV (one block of {block_size_tokens} tokens needs "
                       f"{d.kv_bytes_per_token * block_size_tokens / 1e6:.1f} MB)")
        blocks_per_rank = blocks if blocks_per_rank is None else min(blocks_per_rank, blocks)
    per_stage_devices = lay.stage_devices
    kv_tok = lay.tp * sum((d.kv_bytes_per_token for d in devices), 0.0)
    num_blocks = 0 if problem else lay.dp * int(blocks_per_rank or 0)
    # (a hand-off moves the full layers' KV per token; the windowed layers' last window and the linear layers'
    # per-sequence state are not counted)
    wire_layers = (sum(sum(stage_layers(m, dep, st)) for st in lay.stages) - sliding_layers_in(m, 0, m.num_layers)
                   - linear_layers_in(m, 0, m.num_layers))
    return MemoryPlan(
        device_bytes=lay.devices * hw.memory_bytes, usable_bytes=lay.devices * usable,
        weight_bytes=per_stage_devices * sum((sum(d.weight_bytes.values(), 0.0) for d in devices), 0.0),
        activation_reserve_bytes=lay.devices * reserve,
        kv_capacity_bytes=num_blocks * block_size_tokens * kv_tok, kv_bytes_per_token=kv_tok,
        block_size_tokens=block_size_tokens, num_blocks=num_blocks, devices=lay.devices,
        host_weight_bytes=per_stage_devices * sum((d.host_weight_bytes for d in devices), 0.0),
        kv_wire_bytes_per_token=wire_layers * kv_layer_bytes(m, dep, kv_dtype, 1),
        per_device=tuple(devices), problem=problem, dp=lay.dp)
