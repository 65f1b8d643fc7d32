"""The launch flags each pinned engine version accepts, with the values it accepts where it lists them: the only
flags `engines.py` may write (tests/plan/test_deploy.py checks every generated flag and value against this table).
Shipped with the package: nothing here reads shared/ at run time.

Where each entry comes from (`Accepted.source`):
- `CSV`: the setting is a row of `shared/engine-defaults/<engine>.csv` for that version (the flag named there, or
  the setting's name in the engine's `--dashed-form`).
- `WHEEL`: read from the argparse definitions of the release package PyPI ships, 2026-12: vllm 0.6.0 and 0.8.5
  (`vllm/engine/arg_utils.py`, `vllm/entrypoints/openai/cli_args.py`, quantization choices from
  `vllm/model_executor/layers/quantization/__init__.py`, 0.8.5 boolean and Literal choices from `vllm/config.py`),
  sglang 0.3.0 and 0.4.0 (`sglang/srt/server_args.py`). CSV rows were checked against the same files.
- `DOCS`: TensorRT-LLM's `trtllm-serve` documentation only. No TensorRT-LLM release could be read
  (shared/engine-defaults/README.md: PyPI holds placeholders), so these flags are NOT checked against code.
"""
from __future__ import annotations

from dataclasses import dataclass

CSV, WHEEL, DOCS = "csv", "wheel", "docs"


@dataclass(frozen=True)
class Accepted:
    source: str                                 # CSV | WHEEL | DOCS (module docstring)
    choices: tuple[str, ...] | None = None      # the values the engine lists; None: any value of its type, or a switch


def _flags(source: str, *names: str) -> dict[str, Accepted]:
    return {n: Accepted(source) for n in names}


_VLLM_COMMON = {
    **_flags(CSV, "--max-num-seqs", "--max-num-batched-tokens", "--enable-chunked-prefill", "--gpu-memory-utilization",
             "--swap-space", "--preemption-mode", "--num-scheduler-steps", "--enable-prefix-caching"),
    **_flags(WHEEL, "--tensor-parallel-size", "--pipeline-parallel-size", "--max-model-len",
             "--num-gpu-blocks-override", "--served-model-name", "--host", "--port"),
    "--dtype": Accepted(WHEEL, ("auto", "half", "float16", "bfloat16", "float", "float32")),
    "--distributed-executor-backend": Accepted(WHEEL, ("ray", "mp")),
}

ACCEPTED: dict[tuple[str, str], dict[str, Accepted]] = {
    ("vllm", "0.6.0"): {
        **_VLLM_COMMON,
        "--block-size": Accepted(CSV, ("8", "16", "32")),
        "--kv-cache-dtype": Accepted(WHEEL, ("auto", "fp8", "fp8_e5m2", "fp8_e4m3")),
        "--quantization": Accepted(WHEEL, (
            "aqlm", "awq", "deepspeedfp", "tpu_int8", "fp8", "fbgemm_fp8", "marlin", "gguf", "gptq_marlin_24",
            "gptq_marlin", "awq_marlin", "gptq", "squeezellm", "compressed-tensors", "bitsandbytes", "qqq",
            "experts_int8", "neuron_quant")),
        **_flags(WHEEL, "--speculative-model", "--num-speculative-tokens"),
    },
    ("vllm", "0.8.5"): {
        **_VLLM_COMMON,
        # (0.8.5 builds boolean flags with argparse.BooleanOptionalAction: each has its --no- form)
        **_flags(WHEEL, "--no-enable-prefix-caching", "--no-enable-chunked-prefill", "--data-parallel-size",
                 "--enable-expert-parallel", "--speculative-config"),
        "--scheduling-policy": Accepted(CSV, ("fcfs", "priority")),
        "--block-size": Accepted(CSV, ("1", "8", "16", "32", "64", "128")),
        "--kv-cache-dtype": Accepted(WHEEL, ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")),
        "--quantization": Accepted(WHEEL, (
            "aqlm", "awq", "deepspeedfp", "tpu_int8", "fp8", "ptpc_fp8", "fbgemm_fp8", "modelopt", "nvfp4",
            "marlin", "bitblas", "gguf", "gptq_marlin_24", "gptq_marlin", "gptq_bitblas", "awq_marlin", "gptq",
            "compressed-tensors", "bitsandbytes", "qqq", "hqq", "experts_int8", "neuron_quant", "ipex", "quark",
            "moe_wna16", "torchao")),
    },
    ("sglang", "0.3.0"): {
        **_flags(CSV, "--max-running-requests", "--chunked-prefill-size", "--max-prefill-tokens",
                 "--mem-fraction-static", "--disable-radix-cache"),
        "--schedule-policy": Accepted(CSV, ("lpm", "random", "fcfs", "dfs-weight")),
        **_flags(WHEEL, "--model-path", "--tp-size", "--dp-size", "--context-length", "--served-model-name", "--host",
                 "--port", "--nnodes", "--node-rank", "--nccl-init-addr"),
        "--kv-cache-dtype": Accepted(WHEEL, ("auto", "fp8_e5m2")),
        "--quantization": Accepted(WHEEL, ("awq", "fp8", "gptq", "marlin", "gptq_marlin", "awq_marlin", "squeezellm",
                                           "bitsandbytes")),
        "--dtype": Accepted(WHEEL, ("auto", "half", "float16", "bfloat16", "float", "float32")),
    },
    ("sglang", "0.4.0"): {
        **_flags(CSV, "--max-running-requests", "--chunked-prefill-size", "--max-prefill-tokens",
                 "--mem-fraction-static", "--disable-radix-cache", "--disable-overlap-schedule", "--cuda-graph-max-bs"),
        "--schedule-policy": Accepted(CSV, ("lpm", "random", "fcfs", "dfs-weight")),
        **_flags(WHEEL, "--model-path", "--tp-size", "--dp-size", "--context-length", "--served-model-name", "--host",
                 "--port", "--nnodes", "--node-rank", "--dist-init-addr", "--enable-dp-attention", "--enable-metrics"),
        "--kv-cache-dtype": Accepted(WHEEL, ("auto", "fp8_e5m2")),
        "--quantization": Accepted(WHEEL, ("awq", "fp8", "gptq", "marlin", "gptq_marlin", "awq_marlin",
                                           "bitsandbytes", "gguf")),
        "--dtype": Accepted(WHEEL, ("auto", "half", "float16", "bfloat16", "float", "float32")),
    },
    ("trtllm", "1.3.0rc27"): {
        **_flags(DOCS, "--host", "--port", "--tp_size", "--pp_size", "--ep_size", "--max_batch_size",
                 "--max_num_tokens", "--max_seq_len", "--kv_cache_free_gpu_memory_fraction",
                 "--extra_llm_api_options", "--trust_remote_code"),
        "--backend": Accepted(DOCS, ("pytorch",)),
    },
}

# TensorRT-LLM's `--extra_llm_api_options` YAML: the LLM API keys it may hold (dotted paths), same sources.
TRTLLM_OPTIONS: dict[str, Accepted] = {
    **_flags(CSV, "kv_cache_config.free_gpu_memory_fraction", "kv_cache_config.tokens_per_block",
             "kv_cache_config.enable_block_reuse", "kv_cache_config.enable_partial_reuse",
             "enable_chunked_prefill", "disable_overlap_scheduler", "cuda_graph_config.max_batch_size"),
    "kv_cache_config.dtype": Accepted(DOCS, ("auto", "fp8")),  # (the CSV pins the default `auto` only)
    "scheduler_config.capacity_scheduler_policy": Accepted(CSV, ("GUARANTEED_NO_EVICT", "MAX_UTILIZATION")),
    **_flags(DOCS, "enable_attention_dp", "speculative_config.decoding_type",
             "speculative_config.num_nextn_predict_layers"),
}


def accepted(engine: str, version: str) -> dict[str, Accepted]:
    """The flags of `engine` at `version`; KeyError names the versions the table holds."""
    try:
        return ACCEPTED[(engine, version)]
    except KeyError:
        held = ", ".join(f"{e} {v}" for e, v in ACCEPTED)
        raise KeyError(f"no accepted-flag table for {engine} {version}; held: {held}") from None
