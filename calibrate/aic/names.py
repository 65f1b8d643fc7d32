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
ENGINE_NAMES: dict[str, str] = {"trtllm": "TensorRT-LLM", "vllm": "vLLM", "sglang": "SGLang"}  # as a report says them

# GEMM formats: `sq` is TensorRT-LLM's SmoothQuant W8A8 (our int8: per-channel / per-token scales); nvfp4 is
# measured on Blackwell only (the Hopper silicon rows that name it run gpt-oss's MXFP4 checkpoint, `mxfp4`). Not
# imported: int8_wo (weight-only int8: no format of ours).
GEMM_DTYPES: dict[str, str] = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8_block",
                               "int4_wo": "int4_wo", "sq": "int8", "nvfp4": "nvfp4"}
# MoE formats: `w4a16_mxfp4` is the MXFP4 expert kernel with bf16 activations (our mxfp4: weight-only on Hopper,
# where its compute falls back to bf16; vLLM's default gpt-oss kernel on Blackwell); `w4a8_mxfp4_mxfp8` the MXFP4
# experts with MXFP8 activations, measured on Blackwell only (our mxfp4_a8: TensorRT-LLM's and SGLang's default
# there); nvfp4 (W4A4, Blackwell).
MOE_DTYPES: dict[str, str] = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8_block",
                              "int4_wo": "int4_wo", "w4a16_mxfp4": "mxfp4", "w4a8_mxfp4_mxfp8": "mxfp4_a8",
                              "nvfp4": "nvfp4"}
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
    "mla_prefill": ("mla", "context_mla_perf"),
    "mla_decode": ("mla", "generation_mla_perf"),
    "mla_bmm": ("mla_bmm", "mla_bmm_perf"),
    "deepep_normal": ("comm", "wideep_deepep_normal_perf"),
    "deepep_ll": ("comm", "wideep_deepep_ll_perf"),
    "gdn_prefill": ("linear_attention", "gdn_perf"),
    "gdn_decode": ("linear_attention", "gdn_perf"),
    "dsa_prefill": ("sparse_attention", "dsa_context_module_perf"),
    "dsa_decode": ("sparse_attention", "dsa_generation_module_perf"),
}
# Families measured inside an engine (the rest: NCCL, engine-independent). These decide the default engine (the
# one whose tables hold the most rows); the MLA attention cores are read from the same engine's folder.
ENGINE_FAMILIES: tuple[str, ...] = ("gemm", "attn_prefill", "attn_decode", "moe", "custom_allreduce")
# MLA attention, the kernel alone (`context_mla_perf`, `generation_mla_perf`: FlashMLA / the engine's MLA kernels
# over the latent cache, no projection): the simulator prices MLA's projections (q_a, q_b, kv_a, the prefill
# up-projection, the decode absorbed products, o_proj) as GEMMs of their own, so the module tables
# (`mla_*_module_perf`, the projections included) would count them twice.
MLA_FAMILIES: tuple[str, ...] = ("mla_prefill", "mla_decode")
# MLA decode's absorbed per-head products (`mla_bmm_perf`): W_UK into the query (`mla_gen_pre`: [tokens, nope] x
# [nope, rank] per head) and W_UV out of the latent output (`mla_gen_post`: [tokens, rank] x [rank, v] per head),
# batched over the heads; read from the engine's folder too.
MLA_BMM_OPS: dict[str, str] = {"mla_gen_pre": "mla_bmm_pre", "mla_gen_post": "mla_bmm_post"}
BMM_DTYPES: dict[str, str] = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8"}
# DeepEP dispatch / combine: the library's kernels, measured only in SGLang's wide-EP images
# (`comm/sglang/<version>/wideep_deepep_*`), whatever engine the rest of the profile comes from (like NCCL). Every
# version is read, newest first: a newer version's rows win at the shapes it measured, older versions add the
# shapes it did not (the multi-node rows).
DEEPEP_FAMILIES: tuple[str, ...] = ("deepep_normal", "deepep_ll")
DEEPEP_FRAMEWORK = "sglang"
# DeepEP's normal kernels run on a configurable number of SMs; the tables sweep it. Engines run DeepEP's default
# (`deep_ep.Buffer.num_sms` = 20; SGLang keeps it): other SM counts are left out.
DEEPEP_NORMAL_SMS = 20
# The DeepEP tables count nodes of this many GPUs (their EP ranks: nodes x 8).
DEEPEP_GPUS_PER_NODE = 8
# The GPU a system's rows must have run on (a table may hold rows collected on another GPU: those are left out).
DEVICE_TOKEN: dict[str, str] = {"h100_sxm": "H100", "h200_sxm": "H200", "a100_sxm": "A100", "l40s": "L40S",
                                "b200_sxm": "B200", "gb200": "GB200"}
# The MLA shape AIConfigurator's MLA collectors measure (DeepSeek-V3's; the tables carry only per-device heads):
# a model with other MLA dimensions is not priced from them.
MLA_DIMS: dict[str, int] = {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}

# Gated DeltaNet (Qwen3.5's linear attention), the kernels alone (their projections are GEMMs): one table
# (`gdn_perf`) whose context-phase rows make `gdn_prefill` and generation-phase rows `gdn_decode`, read from the
# engine's folder. Each engine names its kernels; they map onto our ops (a kernel not named here is left out).
GDN_FAMILIES: dict[str, str] = {"gdn_prefill": "context", "gdn_decode": "generation"}
GDN_KERNELS: dict[str, str] = {
    "causal_conv1d_fn": "gdn_conv_prefill",                  # the causal convolution over a prompt's tokens
    "chunk_gated_delta_rule": "gdn_chunk_prefill",           # flash-linear-attention's chunked delta rule (Triton)
    "chunk_gated_delta_rule_flashinfer": "gdn_chunk_prefill",  # FlashInfer's (vLLM on Hopper and Blackwell)
    "chunk_gated_delta_rule_triton": "gdn_chunk_prefill",    # vLLM's Triton path where FlashInfer has none
    "causal_conv1d_update": "gdn_conv_decode",               # one token through the convolution state
    "fused_recurrent_gated_delta_rule": "gdn_recurrent_decode",  # one token through the recurrent state
    "fused_recurrent_gated_delta_rule_packed_decode": "gdn_recurrent_decode",
}

# DeepSeek-V3.2-style sparse attention (MLA whose queries attend the top-k keys a light indexer picks), the whole
# attention module as the engine runs it on one device: the q / kv down- and up-projections, the indexer (its
# projections, its scores over every cached key, the top-k selection), the sparse MLA kernel and o_proj, heads per
# device (`num_heads`; the measurement is one device, `tp_size` 1). Prefill rows (`dsa_context_module_perf`):
# `batch_size` prompts of `isl` tokens, no cached prefix; decode rows (`dsa_generation_module_perf`): `batch_size`
# sequences holding `step` cached tokens. `gemm_type` is the projections' format, `kv_cache_dtype` the cache's. The
# tables measure named models; a model is priced from them only where its config facts equal one of these
# (Hugging Face `config.json`: shared/model-configs/glm-5.json), so the module's projections are its own.
DSA_FAMILIES: tuple[str, ...] = ("dsa_prefill", "dsa_decode")
DSA_MODELS: dict[str, dict[str, int]] = {
    "zai-org/GLM-5": {"hidden_size": 6144, "q_lora_rank": 2048, "kv_lora_rank": 512, "qk_nope_head_dim": 192,
                      "qk_rope_head_dim": 64, "v_head_dim": 256, "index_n_heads": 32, "index_head_dim": 128,
                      "index_topk": 2048},
}


# Checkpoints of a DSA_MODELS model in another weight format (the format is the rows' `gemm_type`).
DSA_CHECKPOINTS: dict[str, str] = {"zai-org/GLM-5-FP8": "zai-org/GLM-5"}
# SGLang's prefill of a prompt no longer than `index_topk` attends every key, so it skips the indexer and runs dense
# MHA over the up-projected cache (SGLang 0.5.14's collector measures this path at prompts <= 2,048 tokens only,
# the indexer paths at every length; its kernel is `sglang_dsa_dense_mha_fa3` on Hopper,
# `sglang_dsa_dense_mha_trtllm_ragged` on Blackwell): at those shapes the rows of a kernel naming it are the engine's.
DSA_DENSE_PREFILL_MARK = "_dsa_dense_mha_"


def dsa_variant(facts: dict[str, int]) -> str | None:
    """The DSA module table's model whose facts equal `facts` (DSA_MODELS' keys), None when none does."""
    for name, dims in DSA_MODELS.items():
        if dims == facts:
            return name
    return None


# The op a family's rows are priced as (`GridModel.latency_s(op, ...)`): NCCL rows carry their own op.
FAMILY_OP: dict[str, str] = {"gemm": "gemm", "attn_prefill": "attn_prefill", "attn_decode": "attn_decode",
                             "moe": "moe_gemm", "custom_allreduce": "allreduce", "mla_prefill": "attn_mla_prefill",
                             "mla_decode": "attn_mla_decode",
                             "dsa_prefill": "dsa_module_prefill", "dsa_decode": "dsa_module_decode"}
GRID_OPS: tuple[str, ...] = ("gemm", "attn_prefill", "attn_decode", "moe_gemm", "allreduce", "all_gather",
                             "reduce_scatter", "all_to_all", "attn_mla_prefill", "attn_mla_decode",
                             "deepep_dispatch", "deepep_combine", "mla_bmm_pre", "mla_bmm_post",
                             "gdn_conv_prefill", "gdn_chunk_prefill", "gdn_conv_decode", "gdn_recurrent_decode",
                             "dsa_module_prefill", "dsa_module_decode")
# DeepEP: each table row holds both phases; the format each phase moves (dispatch: FP8 with one scale per 128
# values, the `_bandwidth_gbps` columns' bytes; combine: BF16).
DEEPEP_PHASES: dict[str, str] = {"deepep_dispatch": "fp8_block", "deepep_combine": "bf16"}
DEEPEP_KERNELS: dict[str, str] = {"deepep_normal": "normal", "deepep_ll": "low_latency"}

# Custom all-reduce kernel sources: CUDA-graph captured (what serving decode runs) or eager.
def allreduce_mode(kernel_source: str) -> str:
    """`graph` for CUDA-graph captured custom all-reduce rows, `eager` for eager ones; TensorRT-LLM's rows (its
    own kernel, always graph-captured in serving) count as `graph`."""
    return "eager" if "eager" in kernel_source.lower() else "graph"


# Kernels a table measured that the engine does not run by default on that GPU (engine, family, kernel, systems):
# left out with the reason, so the op is priced from the kernel the engine does run or, where the table has no
# other, falls back (listed per pool). vLLM's MLA decode on Hopper runs FlashMLA (the MLA backends that force
# 64-token blocks: vllm-project/vllm@v0.11.0 vllm/platforms/cuda.py#L127-182, ../shared/engine-defaults/vllm.csv
# `block_size`); the database's bf16-KV MLA decode rows for vLLM measured the FlashAttention MLA backend instead.
NOT_DEFAULT_KERNELS: dict[tuple[str, str, str], tuple[tuple[str, ...], str]] = {
    ("vllm", "mla_decode", "vllm_flash_attn_mla"): (
        ("h100_sxm", "h200_sxm"),
        "not vLLM's default MLA decode backend on Hopper (FlashMLA: vllm/platforms/cuda.py#L127-182 at v0.11.0)"),
}
