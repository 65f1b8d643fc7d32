"""How AIConfigurator's names map onto ours: GPUs, number formats, collectives and the table families we import.

Everything here is a plain table; `db.py` reads with it and `grid.py` prices with the names on the right-hand side
(`calibrate.ops` op names and `DTYPES`). A name the maps do not hold is not imported: the profile's provenance
lists what was skipped and why.
"""
from __future__ import annotations

# AIConfigurator system name -> conf/hardware entry.
HARDWARE: dict[str, str] = {
    "h100_sxm": "h100_sxm",
    "h200_sxm": "h200",
    "a100_sxm": "a100_80gb",
    "l40s": "l40s",
    "b200_sxm": "b200",
    "gb200": "gb200",
}
SYSTEMS: dict[str, str] = {ours: theirs for theirs, ours in HARDWARE.items()}
ENGINES: tuple[str, ...] = ("vllm", "sglang", "trtllm")

# GEMM formats: `sq` is TensorRT-LLM's SmoothQuant W8A8 (our int8: per-channel / per-token scales). Not imported:
# int8_wo (weight-only int8: no format of ours), nvfp4 (no FP4 format in calibrate.ops.DTYPES yet).
GEMM_DTYPES: dict[str, str] = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8_block",
                               "int4_wo": "int4_wo", "sq": "int8"}
MOE_DTYPES: dict[str, str] = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8_block",
                              "int4_wo": "int4_wo"}
# Attention: `attn_dtype` is the math (Q, softmax, PV) format, `kv_cache_dtype` the cache's.
ATTN_DTYPES: dict[str, str] = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8"}
# Collectives: `message_size` counts elements of this format (checked against bandwidth: docs/cost-model.md).
COMM_DTYPES: dict[str, tuple[str, float]] = {"half": ("fp16", 2.0), "bfloat16": ("bf16", 2.0),
                                             "float16": ("fp16", 2.0), "int8": ("int8", 1.0),
                                             "float32": ("fp32", 4.0)}
NCCL_OPS: dict[str, str] = {"all_reduce": "allreduce", "all_gather": "all_gather",
                            "reduce_scatter": "reduce_scatter", "alltoall": "all_to_all"}

# The table families we import: family -> (AIConfigurator family folder, file stem).
TABLES: dict[str, tuple[str, str]] = {
    "gemm": ("gemm", "gemm_perf"),
    "attn_prefill": ("attention", "context_attention_perf"),
    "attn_decode": ("attention", "generation_attention_perf"),
    "moe": ("moe", "moe_perf"),
    "custom_allreduce": ("comm", "custom_allreduce_perf"),
    "nccl": ("comm", "nccl_perf"),
}
# Families measured inside an engine (the rest: NCCL, engine-independent).
ENGINE_FAMILIES: tuple[str, ...] = ("gemm", "attn_prefill", "attn_decode", "moe", "custom_allreduce")

# The op a family's rows are priced as (`GridModel.latency_s(op, ...)`): NCCL rows carry their own op.
FAMILY_OP: dict[str, str] = {"gemm": "gemm", "attn_prefill": "attn_prefill", "attn_decode": "attn_decode",
                             "moe": "moe_gemm", "custom_allreduce": "allreduce"}
GRID_OPS: tuple[str, ...] = ("gemm", "attn_prefill", "attn_decode", "moe_gemm", "allreduce", "all_gather",
                             "reduce_scatter", "all_to_all")

# Custom all-reduce kernel sources: CUDA-graph captured (what serving decode runs) or eager.
def allreduce_mode(kernel_source: str) -> str:
    """`graph` for CUDA-graph captured custom all-reduce rows, `eager` for eager ones; TensorRT-LLM's rows (its
    own kernel, always graph-captured in serving) count as `graph`."""
    return "eager" if "eager" in kernel_source.lower() else "graph"
