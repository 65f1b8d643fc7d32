"""Engine presets (`conf/engine/<name>.yaml`): an engine's scheduler semantics and memory defaults, resolved for
one pool into the `EngineBatching` parameters and the pool's memory settings.

A pool takes the `engine` group's preset (default `generic`: the `batching` group decides, as before), or its own
`engine:` (a preset name, or a mapping `{name: <preset>, <key>: <override>...}`). Keys (each yaml names the
engine version and the source of each default):
  max_num_seqs, max_num_batched_tokens, chunked_prefill, iteration, admission, watermark_fraction, preemption,
  num_scheduler_steps, stream_each_step, cuda_graph_sizes {small: [...], step, max}, new_token_ratio_init/min/decay,
  host_per_seq_s, overlap, swap_space_gib, gpu_memory_utilization (+ gpu_memory_utilization_by_tp),
  kv_free_memory_fraction, block_size_tokens.
Rules for `null`: max_num_batched_tokens -> max(model context, 2048) (vLLM V0 without chunked prefill);
max_num_seqs -> SGLang's max_running_requests rule over the pool's KV tokens (its request-pool cap
`req_pool_cap`, default 5120 as in 0.3.0); gpu_memory_utilization -> the
`_by_tp` entry for the largest tp <= the pool's, else the pool's own value.
"""
from __future__ import annotations


import yaml

from inferplan.errors import InputError
from inferplan.specs import CONF_DIR as SPEC_CONF_DIR

CONF_DIR = SPEC_CONF_DIR / "engine"
POLICY_KEYS = ("max_num_seqs", "max_num_batched_tokens", "chunked_prefill", "iteration", "admission",
               "watermark_fraction", "preemption", "num_scheduler_steps", "stream_each_step", "cuda_graph_sizes",
               "new_token_ratio_init", "new_token_ratio_min", "new_token_ratio_decay", "host_per_seq_s", "overlap")
RULE_KEYS = ("req_pool_cap",)  # (inputs of the `null` rules, not scheduler parameters)
MEMORY_KEYS = ("gpu_memory_utilization", "gpu_memory_utilization_by_tp", "kv_free_memory_fraction",
               "block_size_tokens", "swap_space_gib")
DOC_KEYS = ("name", "engine_version")


def presets() -> list[str]:
    return sorted(p.stem for p in CONF_DIR.glob("*.yaml"))


def resolve(pool_engine, group_engine: dict | None, where: str) -> dict:
    """The preset a pool runs: its own `engine:` (name or mapping with overrides) over the group's."""
    spec = dict(group_engine or {"name": "generic"})
    if pool_engine is None:
        return _check(spec, where)
    own = {"name": pool_engine} if isinstance(pool_engine, str) else dict(pool_engine)
    name = own.get("name", spec.get("name"))
    if name != spec.get("name"):
        path = CONF_DIR / f"{name}.yaml"
        if not path.is_file():
            raise InputError(where, "engine", f"unknown engine preset {name!r}", f"use one of: {', '.join(presets())}")
        spec = yaml.safe_load(path.read_text()) or {}
    spec.update(own)
    return _check(spec, where)


def _check(spec: dict, where: str) -> dict:
    name = spec.get("name", "generic")
    if name == "generic":
        extra = sorted(set(spec) - {"name"})
        if extra:
            raise InputError(where, f"engine.{extra[0]}", "the generic engine has no settings (the batching group "
                             "decides)", "choose a preset first: engine=vllm_v0|vllm_v1|sglang|trtllm")
        return {"name": "generic"}
    unknown = sorted(set(spec) - set(POLICY_KEYS) - set(MEMORY_KEYS) - set(RULE_KEYS) - set(DOC_KEYS))
    if unknown:
        raise InputError(where, f"engine.{unknown[0]}", "unknown engine key",
                         f"valid keys: {', '.join(POLICY_KEYS + MEMORY_KEYS)}")
    return spec


def graph_sizes(rule) -> tuple[int, ...]:
    """Captured decode batch sizes from `{small: [1, 2, 4], step: 8, max: 256}` ({} or null: none)."""
    if not rule:
        return ()
    sizes = set(int(s) for s in rule.get("small", ()))
    step, top = int(rule.get("step", 8)), int(rule.get("max", 0))
    sizes.update(range(step, top + 1, step))
    return tuple(sorted(s for s in sizes if s <= top))


def memory_settings(spec: dict, tp: int, pool_utilization: float, pool_block: int) -> tuple[float, int]:
    """(gpu_memory_utilization, block_size_tokens) the engine gives the pool."""
    util = spec.get("gpu_memory_utilization")
    if util is None:
        by_tp = {int(k): float(v) for k, v in (spec.get("gpu_memory_utilization_by_tp") or {}).items()}
        fitting = [k for k in by_tp if k <= tp]
        util = by_tp[max(fitting)] if fitting else pool_utilization
    block = spec.get("block_size_tokens")
    return float(util), int(block if block is not None else pool_block)


def policy_params(spec: dict, max_context_tokens: int, kv_tokens: int, host_link_bytes_per_s: float = 0.0,
                  gpus: int = 1) -> dict:
    """`EngineBatching` keyword arguments, the `null` rules resolved for this pool (swap preemption moves KV over
    the hardware's host link into `swap_space_gib` per GPU)."""
    p = {k: spec[k] for k in POLICY_KEYS if k in spec}
    if p.get("preemption") == "swap":
        p["swap_bandwidth_bytes_per_s"] = float(host_link_bytes_per_s)
        p["swap_space_bytes"] = float(spec.get("swap_space_gib") or 0.0) * 2**30 * gpus
    if p.get("max_num_batched_tokens") is None:
        p["max_num_batched_tokens"] = max(max_context_tokens, 2048)
    if p.get("max_num_seqs") is None:
        pool = min(max(int(kv_tokens / max_context_tokens * 512), 2048), int(spec.get("req_pool_cap") or 5120))
        p["max_num_seqs"] = max(1, min(kv_tokens // 2, pool - 1))
    p["cuda_graph_sizes"] = graph_sizes(p.get("cuda_graph_sizes"))
    return p
