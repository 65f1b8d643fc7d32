"""What the matrix knows about the measured rows' models beyond `conf/model`: the architectures the simulator
cannot express, and checkpoint facts a row's columns do not carry. Sources: the models' Hugging Face config.json
facts (the `hf_id` yamls in `conf/model/` name theirs)."""
from __future__ import annotations

import functools

from sim.validate.deployment import model_for_id, normalize_model_id

# Re-exports of one model under a format suffix (nvidia/Qwen3-32B-NVFP4) name the same network.
FORMAT_SUFFIXES = ("-nvfp4", "-mxfp4", "-fp4", "-fp8", "-fp8-dynamic", "-int4")

# Normalized model id -> why its architecture is beyond the simulator (the model layer has GQA and MLA, dense and
# MoE FFNs, sliding-window layers, attention sinks and Gated DeltaNet linear-attention layers). gpt-oss-20b: the
# architecture of gpt-oss-120b, but no conf/model yaml for it yet (its config.json is not among the facts read).
# Qwen3.5-397B-A17B maps to conf/model/qwen3_5_397b_a17b.yaml by its hf_id.
UNSUPPORTED_ARCHITECTURES = {
    "gpt-oss-20b": "no conf/model for it (gpt-oss-120b's architecture, smaller; its config.json was not read)",
}

# conf/model name -> deployment keys every row of the model needs, with why.
MODEL_DEPLOYMENT = {
    "glm_5": ({"sparse_attention": {"top_k_tokens": 2048, "indexer_heads": 32, "indexer_head_dim": 128}},
              "GLM-5 sparse-attention indexer from its config.json (index_topk 2048, index_n_heads 32, "
              "index_head_dim 128)"),
}

# conf/model name -> (the row's format, the format the checkpoint's scales make it, why): a checkpoint whose config.json
# states block-wise scales is that format whatever the row's column calls it (the engine loads the checkpoint as
# written, and block-scaled FP8 runs other GEMM and MoE kernels than per-tensor FP8).
CHECKPOINT_FORMAT = {
    "minimax_m2_5": ("fp8", "fp8_block", "MiniMax-M2.5 FP8 checkpoint with 128x128 block scales (config.json "
                     "quantization_config weight_block_size [128, 128]): fp8_block"),
    "glm_5": ("fp8", "fp8_block", "GLM-5 FP8 checkpoint (zai-org/GLM-5-FP8) with 128x128 block scales on every "
              "linear layer (its config.json quantization_config weight_block_size [128, 128]; conf/model/glm_5.yaml): "
              "fp8_block"),
}

# conf/model name -> (expert format, weight groups the checkpoint keeps in bf16 when its experts are in that format).
CHECKPOINT_BF16_GROUPS = {
    "kimi_k2_5": ("int4_wo", ("attention", "ffn", "shared_experts"),
                  "Kimi-K2.5 INT4 checkpoint: routed experts INT4 (group 32); attention, shared experts and the dense "
                  "MLP in bf16 (config.json quantization_config.ignore)"),
}


# conf/model name -> (weight format of every group, the experts' format, why): a checkpoint that ships in one
# format whatever the row's precision column says. gpt-oss is published only as MXFP4 experts with the rest in
# bf16; the rows' labels (nvfp4, fp8) name what the benchmark requested, not a checkpoint. Hopper has no FP4
# units, so the engines load the MXFP4 experts and run them weight-only (vLLM's Marlin/Triton MXFP4 MoE,
# TensorRT-LLM's W4A16 MXFP4 MoE: the `w4a16_mxfp4` tables); on Blackwell each engine's default kernel decides
# the activations' format (`MXFP4_EXPERTS_ON_FP4_UNITS`).
CHECKPOINT_WEIGHTS = {
    "gpt_oss_120b": ("bf16", "mxfp4", "gpt-oss-120b checkpoint: routed experts MXFP4, attention, router, embedding "
                     "and lm_head bf16 (config.json quantization_config.quant_method mxfp4, modules_to_not_convert); "
                     "the row's precision label is not a checkpoint of this model"),
}

# Row engine -> (expert format, why): the MXFP4 expert kernel each engine runs by default on hardware with FP4 units
# (conf/hardware lists an fp4 peak: B200, GB200). The AIConfigurator collections agree: TensorRT-LLM's B200 and
# GB200 MoE tables measure only `w4a8_mxfp4_mxfp8`; SGLang's GB200 table measures both kernels (its MXFP4 method's
# kernel, `sglang_mxfp4_flashinfer_trtllm_moe`, only with MXFP8 activations); vLLM's tables measure both, its
# gpt-oss method's kernel (`vllm_gptossmxfp4moe_flashinfer_trtllm_mxfp4_bf16`) with bf16 activations.
MXFP4_EXPERTS_ON_FP4_UNITS = {
    "trtllm": ("mxfp4_a8", "TensorRT-LLM on Blackwell: MXFP4 experts with MXFP8 activations (an MXFP4 checkpoint "
                           "loads as W4A8_MXFP4_MXFP8 on SM100+, W4A16_MXFP4 below): mxfp4_a8"),
    "sglang": ("mxfp4_a8", "SGLang on Blackwell: gpt-oss's experts on FlashInfer's MXFP4 MoE (moe_runner_backend "
                           "flashinfer_mxfp4 on SM100), activations quantised to MXFP8 unless "
                           "--flashinfer-mxfp4-moe-precision bf16: mxfp4_a8"),
    "vllm": ("mxfp4", "vLLM on Blackwell: FlashInfer's MXFP4 x BF16 MoE (its SM100 default; MXFP8 activations only "
                      "with VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1): mxfp4 with bf16 activations"),
}

# conf/model name -> the NVFP4 checkpoint a row labelled nvfp4 runs on hardware with FP4 units, or the row is not
# expressed: NVIDIA's ModelOpt re-exports (`nvidia/<model>-NVFP4`; a row may name it or the original with the
# label). Every weight group is priced in NVFP4 as the row's gemm and moe columns say: which layers a re-export
# leaves in bf16 (lm_head; on some models attention) is in its config.json, which is not among the facts read.
# Hopper has no NVFP4 kernel, so these rows are refused there (gpt-oss aside: `CHECKPOINT_WEIGHTS`).
NVFP4_CHECKPOINTS = {
    "qwen3_32b": "nvidia/Qwen3-32B-NVFP4",
    "kimi_k2_5": "nvidia/Kimi-K2.5-NVFP4",
    "minimax_m2_5": "nvidia/MiniMax-M2.5-NVFP4 (its config.json gives conf/model's attention fields)",
    "glm_5": "NVIDIA's NVFP4 re-export of GLM-5",
}


def base_model_id(model_path: str) -> str:
    """The normalized id with a format suffix removed: `nvidia/Qwen3-32B-NVFP4` -> `qwen3-32b`."""
    name = normalize_model_id(model_path)
    for suffix in FORMAT_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def unsupported_architecture(model_path: str) -> str | None:
    return UNSUPPORTED_ARCHITECTURES.get(base_model_id(model_path))


@functools.cache
def conf_model(model_path: str) -> str | None:
    """The `conf/model` name of the row's network (its `hf_id`, format suffixes ignored), or None."""
    return model_for_id(model_path) or model_for_id(base_model_id(model_path))
