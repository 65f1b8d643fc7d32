"""Where the model's pieces sit in one instance: pipeline stages, DP ranks, expert slots per device.

An instance is `pp` stages; each stage is `dp` attention ranks of `tp` devices (tp x dp devices). Attention, dense
layers, shared experts, embeddings and the LM head are replicated per DP rank and sharded by TP. Routed experts are
either sharded like the dense FFN (ep = 1: every DP rank holds all experts, TP-split) or spread over every device of
the stage in `ep` groups of `moe_tp = tp x dp / ep` devices: each group holds (E + R) / ep expert slots (`redundant`
extra replicas), each of its devices 1 / moe_tp of every one of them (ep = tp x dp: whole experts, moe_tp 1; a
divisor of it: the MoE TP x EP mix TensorRT-LLM's `moe_tp_size` x `moe_ep_size` and SGLang's `ep_size` < `tp_size`
express). A mix with attention DP is not modelled (the partial sums of an EP group's TP ranks would need a reduction
over that group, which no measured collective prices): such a deployment is refused. Layers
are split contiguously over stages, the first `L mod pp` stages taking one more; the embedding sits on the first
stage, the LM head and any MTP module on the last.
"""
from __future__ import annotations

from dataclasses import dataclass

from inferplan.errors import InputError
from inferplan.specs import ModelSpec
from inferplan.config.deployment import Deployment


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: its dense (attention + MLP) and MoE layer counts."""

    dense_layers: int
    moe_layers: int
    first: bool
    last: bool


@dataclass(frozen=True)
class Layout:
    tp: int
    dp: int
    ep: int
    pp: int
    stages: tuple[Stage, ...]
    expert_slots_per_layer: int     # routed experts + redundant replicas of one MoE layer (0: dense model)
    cold_experts: int               # routed experts of one MoE layer kept in host memory

    @property
    def stage_devices(self) -> int:
        return self.tp * self.dp

    @property
    def devices(self) -> int:
        return self.tp * self.dp * self.pp

    @property
    def moe_tp(self) -> int:
        """Devices that split each routed expert: tp without expert parallelism, else tp x dp / ep."""
        return self.tp if self.ep == 1 else self.tp * self.dp // self.ep

    @property
    def expert_share_per_device(self) -> float:
        """Fraction of one MoE layer's expert slots a device holds: 1 / moe_tp of each of its EP group's 1 / ep
        (whole experts when moe_tp is 1), or 1/tp of each (ep = 1)."""
        return 1.0 / (self.ep * self.moe_tp) if self.ep > 1 else 1.0 / self.tp


def _split(n: int, parts: int) -> list[int]:
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def tp_shards(m: ModelSpec, tp: int, ep: int, moe_tp: int | None = None) -> list[str]:
    """What `tp` cannot shard evenly the way the engines shard it (empty: nothing). vLLM, SGLang and TensorRT-LLM
    split attention heads evenly over TP ranks; KV heads too, or, with more ranks than KV heads, replicate each on
    tp / kv_heads ranks (vLLM `QKVParallelLinear`); the MLP's intermediate dimension column-wise; routed experts
    without expert parallelism like the MLP, with it over each EP group's `moe_tp` devices (whole experts go to
    EP groups: checked by `ep`)."""
    bad = []
    if m.num_heads % tp:
        bad.append(f"{m.num_heads} attention heads")
    kv = m.num_kv_heads
    if m.attention_kind != "mla" and kv % tp and tp % kv:
        bad.append(f"{kv} KV heads (nor is tp a multiple of them)")
    dense_layers = m.num_layers - m.num_moe_layers
    if dense_layers and m.intermediate_size % tp:
        bad.append(f"the MLP's {m.intermediate_size} intermediate size")
    split = tp if ep == 1 else (moe_tp or 1)
    if m.moe is not None and m.moe.expert_intermediate_size % split:
        bad.append(f"the experts' {m.moe.expert_intermediate_size} intermediate size"
                   + ("" if ep == 1 else f" (split by moe_tp = {split})"))
    return bad


def _check_tp(m: ModelSpec, dep: Deployment, where: str) -> None:
    group = dep.tp * dep.dp
    bad = tp_shards(m, dep.tp, dep.ep, group // dep.ep if dep.ep > 1 and group % dep.ep == 0 else 1)
    if bad:
        fits = [t for t in range(1, 65) if not tp_shards(m, t, dep.ep if dep.ep == 1 else t * dep.dp)]
        raise InputError(where, "tp", f"tp={dep.tp} does not divide {m.name}'s {' or '.join(bad)}, which the "
                         "serving engines shard evenly over tensor-parallel ranks",
                         f"use tp in {{{', '.join(map(str, fits))}}}")


def build_layout(m: ModelSpec, dep: Deployment, where: str) -> Layout:
    """Check `dep` against the model and place it; every mismatch is an `InputError` with the fix."""
    _check_tp(m, dep, where)
    def fail(key: str, problem: str, fix: str):
        raise InputError(where, f"deployment.{key}", problem, fix)

    e = m.moe
    opts = dep.experts
    group = dep.tp * dep.dp
    if dep.ep > 1:
        if e is None:
            fail("ep", f"{m.name} has no routed experts", "drop ep (or set ep: 1)")
        if group % dep.ep:
            fail("ep", f"must divide tp x dp = {group} (experts spread over every device of a stage in ep groups of "
                 f"tp x dp / ep devices), got {dep.ep}",
                 f"set ep to one of {{{', '.join(str(d) for d in range(1, group + 1) if group % d == 0)}}}")
        if dep.ep != group and dep.dp > 1:
            fail("ep", f"ep={dep.ep} with dp={dep.dp} splits each expert over {group // dep.ep} devices under "
                 "attention DP: that MoE TP x EP mix with data-parallel attention is not modelled",
                 f"set ep: {group} (whole experts) or dp: 1")
        assert e is not None
        if (e.num_experts + opts.redundant) % dep.ep:
            fail("experts.redundant", f"{e.num_experts} experts + {opts.redundant} redundant do not split evenly over "
                 f"ep={dep.ep} ranks", "choose redundant so that (experts + redundant) is a multiple of ep")
    elif opts.redundant:
        fail("experts.redundant", "redundant replicas need expert parallelism (ep > 1)", "set ep or drop redundant")
    if e is None and (opts.cold_fraction or opts.load_histogram or opts.imbalance or opts.zipf_s):
        fail("experts", f"{m.name} has no routed experts", "drop the experts options")
    if e is not None and opts.load_histogram is not None and len(opts.load_histogram) != e.num_experts:
        fail("experts.load_histogram", f"has {len(opts.load_histogram)} entries, the model has {e.num_experts} experts",
             "give one relative load per routed expert")
    if dep.pp > m.num_layers:
        fail("pp", f"{dep.pp} stages for {m.num_layers} layers", "use at most one stage per layer")
    if dep.mtp is not None and m.mtp_modules < 1:
        fail("mtp", f"{m.name} has no multi-token-prediction module (mtp_modules / num_nextn_predict_layers)",
             "drop mtp, or use a model whose config declares one")
    dense_first = m.num_layers - m.num_moe_layers
    stages, start = [], 0
    counts = _split(m.num_layers, dep.pp)
    for i, n in enumerate(counts):
        dense = max(0, min(start + n, dense_first) - start)
        stages.append(Stage(dense, n - dense, i == 0, i == dep.pp - 1))
        start += n
    slots = 0 if e is None else e.num_experts + opts.redundant
    cold = 0 if e is None else int(round(opts.cold_fraction * e.num_experts))
    return Layout(dep.tp, dep.dp, dep.ep, dep.pp, tuple(stages), slots, cold)
