"""The engine preset's scheduler and front end, built for one instance: the preset itself is a record
(`inferplan/config/engine.py` `EnginePreset`, resolved at load); what depends on the instance's KV cache and the
pool's hardware is built here, when the pool starts an instance.
"""
from __future__ import annotations

from inferplan.config.engine import EnginePreset
from sim.core.instance.batching.engine import EngineBatching
from sim.core.instance.frontend import FrontEnd
from sim.core.instance.kv_cache import BlockManager


def frontend(preset: EnginePreset) -> FrontEnd:
    """The API server's time outside the kernels (all zero: none)."""
    return FrontEnd(float(preset.frontend_per_request_s), float(preset.frontend_per_prompt_token_s),
                    float(preset.frontend_per_stream_s), float(preset.frontend_per_prefill_s),
                    float(preset.frontend_per_prefill_stream_s), str(preset.frontend_path),
                    float(preset.frontend_per_step), float(preset.frontend_per_step_token))


def build_scheduler(preset: EnginePreset, kv: BlockManager, max_context_tokens: int, kv_tokens: int,
                    host_link_bytes_per_s: float = 0.0, gpus: int = 1, dp: int = 1) -> EngineBatching:
    """The engine's scheduler over `kv` for a pool holding `kv_tokens` tokens of KV per instance of `dp` attention-DP
    ranks (swap preemption moves KV over the hardware's host link into `swap_space_gib` per GPU)."""
    swap = preset.preemption == "swap"
    return EngineBatching(
        kv, max_num_seqs=preset.max_seqs(max_context_tokens, kv_tokens, dp),
        max_num_batched_tokens=preset.token_budget(max_context_tokens, dp), chunked_prefill=preset.chunked_prefill,
        admission=preset.admission, watermark_fraction=preset.watermark_fraction, preemption=preset.preemption,
        iteration=preset.iteration, num_scheduler_steps=preset.num_scheduler_steps,
        stream_each_step=preset.stream_each_step, cuda_graph_sizes=preset.cuda_graph_sizes,
        new_token_ratio_init=preset.new_token_ratio_init, new_token_ratio_min=preset.new_token_ratio_min,
        new_token_ratio_decay=preset.new_token_ratio_decay, host_per_seq_s=preset.host_per_seq_s,
        overlap=preset.overlap, frontend=frontend(preset),
        swap_bandwidth_bytes_per_s=float(host_link_bytes_per_s) if swap else 0.0,
        swap_space_bytes=float(preset.swap_space_gib or 0.0) * 2**30 * gpus if swap else 0.0)
