"""How much of a device an engine gives its KV cache, as the engine's own code computes it.

Two accountings (the engine preset's `memory_accounting`):

* `profiled` (vLLM V1, TensorRT-LLM): the engine takes `gpu_memory_utilization` of the device, runs one forward of
  `max_num_batched_tokens` tokens and, in vLLM, a sampler over the logits of `min(max_num_seqs,
  max_num_batched_tokens)` dummy requests, and gives the KV cache what the weights and that run's peak leave
  (vLLM 0.18 `Worker.determine_available_memory`: requested memory - weights - torch peak increase - non-torch
  increase). The sampler's peak (`sampler_peak_bytes`) is a tensor per logit of every dummy request on every
  tensor-parallel rank (V1 all-gathers the logits: each rank samples the full vocabulary).
* `static_fraction` (SGLang): `mem_fraction_static` is the share of the device for weights and the KV pool;
  activations and CUDA graphs live in the rest (server_args.py's docstring: "mem_fraction_static = (model weights
  + KV cache pool) / GPU memory capacity"), so no activation reserve comes out of it. Its default is a rule of the
  device's memory, the parallel size and the version (`sglang_mem_fraction_static`).

Sources: shared/engine-defaults/sglang.csv (v0.5.1, v0.5.6, v0.5.9 rows: mem_fraction_static, chunked_prefill_size,
cuda_graph_max_bs) and the vLLM wheels' `vllm/v1/worker/gpu_model_runner.py` `_dummy_sampler_run` (top_k = vocab -
1, top_p 0.9: the sorting path) with `vllm/v1/sample/sampler.py` and `vllm/v1/sample/ops/topk_topp_sampler.py`.
"""
from __future__ import annotations

from inferplan.config.device_defaults import (GIB_MIB, MIB, SGLANG_0_5_1, SGLANG_0_5_6, sglang_chunk_tokens,
                                              sglang_graph_max_bs)

# `mem_fraction_rule` values: the version whose server_args rule a preset follows (0.5.1 .. 0.5.5: reserved memory
# by device tier, sglang.csv v0.5.1, L366-395; 0.5.6 .. 0.5.14: reserved from chunk and graph sizes, v0.5.6, v0.5.9).
FRACTION_RULES = (SGLANG_0_5_1, SGLANG_0_5_6)
ACCOUNTINGS = ("profiled", "static_fraction")


def _tier_reserved_mib(gpu_mib: float, parallel: int) -> float:
    """SGLang 0.5.1: memory (MiB) kept out of the static fraction, by device tier."""
    if gpu_mib < 35 * GIB_MIB:                       # T4, A10, L40, 4090: chunk 2k, graphs <= 8
        return (2.8 + parallel / 10) * GIB_MIB
    if gpu_mib < 90 * GIB_MIB:                       # H100, A100: chunk 8k, graphs <= 160
        return (9.5 + parallel / 2) * GIB_MIB
    if gpu_mib < 160 * GIB_MIB:                      # H20, H200: chunk 8k, graphs <= 256
        return (12 + parallel / 2) * GIB_MIB
    return 32.0 * GIB_MIB                            # B200, MI300: chunk 16k, graphs <= 512


def sglang_mem_fraction_static(rule: str, device_bytes: float, tp_size: int, pp_size: int = 1,
                               dp_attention_size: int = 1) -> float:
    """SGLang's default `mem_fraction_static` on a device of `device_bytes` (as the driver reports it) under
    `rule`: round((gpu_mib - reserved_mib) / gpu_mib, 3). `tp_size` is SGLang's (every device of a pipeline stage,
    attention-DP ranks included); `dp_attention_size` > 1 turns DP attention on. Speculative decoding and
    multimodal adjustments are not modelled."""
    gpu_mib = device_bytes / MIB
    parallel = tp_size * pp_size
    dp_attention = dp_attention_size > 1
    if rule == SGLANG_0_5_1:
        reserved = _tier_reserved_mib(gpu_mib, parallel) + (4 * GIB_MIB if dp_attention else 0.0)
    elif rule == SGLANG_0_5_6:
        graph_bs = sglang_graph_max_bs(gpu_mib, tp_size)
        reserved = 512 + max(sglang_chunk_tokens(gpu_mib), 2048) * 1.5 + graph_bs * 2 + parallel / 8 * GIB_MIB
        if dp_attention:
            reserved += graph_bs * dp_attention_size * 3
            if graph_bs > 300:
                reserved += graph_bs * dp_attention_size * 1.5
        if gpu_mib > 60 * GIB_MIB:
            reserved = max(reserved, 10 * GIB_MIB)
    else:
        raise ValueError(f"unknown mem_fraction_rule {rule!r} (one of {', '.join(FRACTION_RULES)})")
    return round((gpu_mib - reserved) / gpu_mib, 3)


def sampler_peak_bytes(bytes_per_logit: float, max_num_seqs: int | None, max_num_batched_tokens: int | None,
                       vocab_size: int) -> float:
    """Per device: the profile run's dummy sampler peak, `bytes_per_logit` x vocab x min(max_num_seqs,
    max_num_batched_tokens) dummy requests (vLLM V1 `_dummy_run(max_num_tokens)` splits its tokens over that many
    requests, each sampled once). 0 without a per-logit size or either limit."""
    if not bytes_per_logit or not max_num_seqs or not max_num_batched_tokens:
        return 0.0
    return float(bytes_per_logit) * vocab_size * min(int(max_num_seqs), int(max_num_batched_tokens))
