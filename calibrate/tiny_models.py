"""Two toy models (one GQA dense, one MLA + MoE) with the structure of Llama-3 and DeepSeek-V3 at a few hundred
hidden units: the whole calibration runs on them in seconds, on a CPU, in tests and in GPU-session rehearsals.

Dims are multiples of 128 where the kernels' formats need it (int4 groups, fp8 blocks) and the MLA ranks are
powers of two (`attn_mla_decode` requires it).
"""
from __future__ import annotations

from pathlib import Path

import yaml

TINY_MODELS: dict[str, dict] = {
    "tiny_gqa": {
        "name": "tiny_gqa", "num_layers": 2, "hidden_size": 256, "vocab_size": 1024, "max_context_tokens": 512,
        "attention": {"kind": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 64},
        "ffn": {"kind": "gated", "intermediate_size": 512},
    },
    "tiny_mla": {
        "name": "tiny_mla", "num_layers": 3, "hidden_size": 256, "vocab_size": 1024, "max_context_tokens": 512,
        "attention": {"kind": "mla", "num_heads": 4, "q_lora_rank": 128, "kv_lora_rank": 128,
                      "qk_nope_head_dim": 32, "qk_rope_head_dim": 32, "v_head_dim": 32},
        "ffn": {"kind": "gated", "intermediate_size": 512, "first_dense_layers": 1,
                "moe": {"num_experts": 8, "top_k": 2, "expert_intermediate_size": 128, "shared_experts": 1}},
    },
}
STANDS_FOR = {"llama3_8b": "tiny_gqa", "deepseek_v3": "tiny_mla"}


def write_tiny_model(name: str, folder: str | Path) -> Path:
    """Write `TINY_MODELS[name]` as `<folder>/<name>.yaml` (a model file `inferplan.specs.load_model` reads)."""
    path = Path(folder) / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(TINY_MODELS[name], sort_keys=False))
    return path
