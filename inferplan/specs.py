"""Hardware and model specifications, loaded from `conf/hardware/*.yaml` and `conf/model/*.yaml` into their records
(`HardwareSpec`, `ModelSpec`: inferplan/config/specs.py).

Shared by calibration (peaks for rooflines, shapes to time) and simulation (pricing, memory). A name resolves to
`conf/<group>/<name>.yaml` in the repository; a path ending in `.yaml` (or a Hugging Face `config.json`, for
models) is read as is. Every problem is an `InputError` naming the file, the field and the fix.
"""
from __future__ import annotations

import json
from pathlib import Path

from inferplan.config.specs import HardwareSpec, LinearAttentionSpec, ModelSpec, MoESpec
from inferplan.config.yaml_files import read_yaml
from inferplan.errors import InputError

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


def available(group: str) -> list[str]:
    """The names of the yaml files in `conf/<group>/` (the valid choices)."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def _read_yaml(group: str, name_or_path: str) -> tuple[Path, dict]:
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml", ".json"):
        path = CONF_DIR / group / f"{name_or_path}.yaml"
        if not path.is_file():
            raise InputError(f"conf/{group}", "name", f"unknown {group} {name_or_path!r}",
                             f"use one of: {', '.join(available(group))}")
    if not path.is_file():
        raise InputError(path, "path", "file not found", f"give an existing file or one of: {', '.join(available(group))}")
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise InputError(path, "file", f"cannot parse ({type(err).__name__})", "fix the syntax") from None
    else:
        data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "file", "is not a mapping", f"see conf/{group}/ for the expected keys")
    return path, data


def _num(path: Path, data: dict, key: str, *, positive: bool = True, default=None) -> float:
    if key not in data or data[key] is None:
        if default is not None:
            return float(default)
        raise InputError(path, key, "missing", f"add `{key}:` (see conf/hardware/h100_sxm.yaml)")
    try:
        value = float(data[key])
    except (TypeError, ValueError):
        raise InputError(path, key, f"is not a number: {data[key]!r}", "give a number") from None
    if positive and not value > 0:
        raise InputError(path, key, f"must be > 0, got {value}", "give a positive number")
    return value


def load_hardware(name_or_path: str) -> HardwareSpec:
    path, d = _read_yaml("hardware", name_or_path)
    peaks = d.get("peak_flops_per_s")
    if not isinstance(peaks, dict) or "bf16" not in peaks:
        raise InputError(path, "peak_flops_per_s", "needs a mapping with at least bf16", "add peak_flops_per_s: {bf16: ...}")
    peak = {}
    for k, v in peaks.items():
        try:
            peak[str(k)] = float(v)
        except (TypeError, ValueError):
            raise InputError(path, f"peak_flops_per_s.{k}", f"is not a number: {v!r}", "give a number") from None
        if peak[str(k)] <= 0:
            raise InputError(path, f"peak_flops_per_s.{k}", "must be > 0", "give a positive number")
    return HardwareSpec(
        name=str(d.get("name", path.stem)), kind=str(d.get("kind", "gpu")),
        memory_bytes=_num(path, d, "memory_bytes"),
        mem_bandwidth_bytes_per_s=_num(path, d, "mem_bandwidth_bytes_per_s"),
        peak_flops_per_s=peak,
        devices_per_node=int(_num(path, d, "devices_per_node", default=1)),
        intra_node_bandwidth_bytes_per_s=_num(path, d, "intra_node_bandwidth_bytes_per_s"),
        intra_node_latency_s=_num(path, d, "intra_node_latency_s", positive=False, default=0.0),
        inter_node_bandwidth_bytes_per_s=_num(path, d, "inter_node_bandwidth_bytes_per_s"),
        inter_node_latency_s=_num(path, d, "inter_node_latency_s", positive=False, default=0.0),
        host_link_bandwidth_bytes_per_s=_num(path, d, "host_link_bandwidth_bytes_per_s"),
        power_w=_num(path, d, "power_w"),
        idle_power_w=_num(path, d, "idle_power_w", positive=False, default=0.0),
        usd_per_hour=_num(path, d, "usd_per_hour", positive=False),
        source=str(path),
    )


def _int(path: Path, d: dict, key: str, default=None) -> int:
    value = _num(path, d, key, default=default)
    return int(value)


def _qk_norm(path: Path, att: dict) -> bool:
    """`attention.qk_norm`: `per_head` (Qwen3, Llama-4: within each head, no communication), `across_heads` (over a
    layer's whole query and key vectors: MiniMax-M2's `qk_norm_type: per_layer`) or absent."""
    norm = att.get("qk_norm")
    if norm not in (None, "per_head", "across_heads"):
        raise InputError(path, "attention.qk_norm", f"must be per_head or across_heads, got {norm!r}",
                         "set attention.qk_norm: across_heads for a norm over all heads of a layer, or remove it")
    return norm == "across_heads"


def _attention_block(path: Path, att: dict, key: str, example: str) -> dict | None:
    """`attention.<key>`: a mapping, or None where absent."""
    block = att.get(key)
    if block is not None and not isinstance(block, dict):
        raise InputError(path, f"attention.{key}", f"is not a mapping: {block!r}", example)
    return block


def _layer_indices(layers: object, num_layers: int) -> tuple[int, ...] | None:
    """A non-empty list of layer indices below `num_layers`, sorted and unique (None if it is not one)."""
    if isinstance(layers, list) and layers and all(isinstance(i, int) and 0 <= i < num_layers for i in layers):
        return tuple(sorted(set(layers)))
    return None


def _sliding_window(path: Path, att: dict, num_layers: int) -> dict:
    """`attention.sliding_window: {tokens: W, layers: even | odd | all | [indices]}` as ModelSpec fields (none: {})."""
    sw = _attention_block(path, att, "sliding_window", "give {tokens: 128, layers: even}")
    if sw is None:
        return {}
    tokens = _int(path, sw, "tokens")
    layers = sw.get("layers", "all")
    patterns = {"even": range(0, num_layers, 2), "odd": range(1, num_layers, 2), "all": range(num_layers)}
    indices = tuple(patterns[layers]) if isinstance(layers, str) and layers in patterns else \
        _layer_indices(layers, num_layers)
    if indices is None:
        raise InputError(path, "attention.sliding_window.layers", f"must be even, odd, all or a list of layer "
                         f"indices below {num_layers}, got {layers!r}", "give e.g. layers: even")
    return {"sliding_window_tokens": tokens, "sliding_window_layers": indices}


# Formats a linear-attention state may be kept in (a config.json's `mamba_ssm_dtype` names them as torch does).
STATE_DTYPES: dict[str, str] = {"fp32": "fp32", "float32": "fp32", "bf16": "bf16", "bfloat16": "bf16",
                                "fp16": "fp16", "float16": "fp16"}


def _state_dtype(path: Path, field: str, value: object) -> str:
    fmt = STATE_DTYPES.get(str(value))
    if fmt is None:
        raise InputError(path, field, f"unknown state format {value!r}", f"use one of: {', '.join(STATE_DTYPES)}")
    return fmt


def _linear_layers(path: Path, field: str, spec: dict, num_layers: int) -> tuple[int, ...]:
    """The linear-attention layers: `layers: [indices]`, or `full_attention_interval: N` (every Nth layer, the
    last of each group of N, is full attention; the others linear)."""
    if "layers" in spec:
        indices = _layer_indices(spec["layers"], num_layers)
        if indices is None:
            raise InputError(path, f"{field}.layers", f"must be a list of layer indices below {num_layers}, got "
                             f"{spec['layers']!r}", "give e.g. layers: [0, 1, 2] or full_attention_interval: 4")
        return indices
    interval = _int(path, spec, "full_attention_interval") if "full_attention_interval" in spec else 0
    if interval < 2:
        raise InputError(path, f"{field}.full_attention_interval", "missing or below 2",
                         "give full_attention_interval: N (every Nth layer full attention) or layers: [indices]")
    return tuple(i for i in range(num_layers) if (i + 1) % interval)


def _linear_attention(path: Path, att: dict, num_layers: int) -> dict:
    """`attention.linear_attention: {kind: gated_deltanet, layers | full_attention_interval, num_key_heads,
    num_value_heads, key_head_dim, value_head_dim, conv_kernel_tokens, state_dtype}` as ModelSpec fields."""
    la = _attention_block(path, att, "linear_attention", "see conf/model/qwen3_5_397b_a17b.yaml")
    if la is None:
        return {}
    field = "attention.linear_attention"
    if la.get("kind", "gated_deltanet") != "gated_deltanet":
        raise InputError(path, f"{field}.kind", f"unknown linear attention {la.get('kind')!r}",
                         "use gated_deltanet (the only kind priced)")
    if att.get("sliding_window") is not None:
        raise InputError(path, field, "given with attention.sliding_window",
                         "a model has either linear-attention or sliding-window layers beside its full ones")
    spec = LinearAttentionSpec(
        layers=_linear_layers(path, field, la, num_layers), num_key_heads=_int(path, la, "num_key_heads"),
        num_value_heads=_int(path, la, "num_value_heads"), key_head_dim=_int(path, la, "key_head_dim"),
        value_head_dim=_int(path, la, "value_head_dim"), conv_kernel_tokens=_int(path, la, "conv_kernel_tokens"),
        state_dtype=_state_dtype(path, f"{field}.state_dtype", la.get("state_dtype", "fp32")))
    return {"linear_attention": spec}


def load_model(name_or_path: str) -> ModelSpec:
    path, d = _read_yaml("model", name_or_path)
    if path.suffix == ".json":
        return _model_from_hf_config(path, d)
    att = d.get("attention") or {}
    ffn = d.get("ffn") or {}
    if not isinstance(att, dict) or att.get("kind") not in ("gqa", "mla"):
        raise InputError(path, "attention.kind", f"must be gqa or mla, got {att.get('kind') if isinstance(att, dict) else att!r}",
                         "set attention.kind")
    moe = None
    if isinstance(ffn, dict) and ffn.get("moe"):
        m = ffn["moe"]
        moe = MoESpec(num_experts=_int(path, m, "num_experts"), top_k=_int(path, m, "top_k"),
                      expert_intermediate_size=_int(path, m, "expert_intermediate_size"),
                      shared_experts=int(m.get("shared_experts", 0) or 0))
    common = dict(name=str(d.get("name", path.stem)), num_layers=_int(path, d, "num_layers"),
                  hidden_size=_int(path, d, "hidden_size"), vocab_size=_int(path, d, "vocab_size"),
                  intermediate_size=_int(path, ffn, "intermediate_size"), ffn_kind=str(ffn.get("kind", "gated")),
                  first_dense_layers=int(ffn.get("first_dense_layers", 0) or 0), moe=moe,
                  mtp_modules=int(d.get("mtp_modules", 0) or 0),
                  max_context_tokens=int(d.get("max_context_tokens", 8192)), source=str(path),
                  attention_sinks=bool(att.get("sinks", False)),
                  qk_norm_across_heads=_qk_norm(path, att),
                  attention_output_gate=bool(att.get("output_gate", False)))
    if att["kind"] == "gqa":
        common.update(_sliding_window(path, att, int(common["num_layers"])))
        common.update(_linear_attention(path, att, int(common["num_layers"])))
        return ModelSpec(attention_kind="gqa", num_heads=_int(path, att, "num_heads"),
                         num_kv_heads=_int(path, att, "num_kv_heads"), head_dim=_int(path, att, "head_dim"), **common)
    nope, rope = _int(path, att, "qk_nope_head_dim"), _int(path, att, "qk_rope_head_dim")
    return ModelSpec(attention_kind="mla", num_heads=_int(path, att, "num_heads"), num_kv_heads=1,
                     head_dim=nope + rope, q_lora_rank=int(att.get("q_lora_rank", 0) or 0),
                     kv_lora_rank=_int(path, att, "kv_lora_rank"), qk_nope_head_dim=nope, qk_rope_head_dim=rope,
                     v_head_dim=_int(path, att, "v_head_dim"), **common)


def _model_from_hf_config(path: Path, c: dict) -> ModelSpec:
    """A Hugging Face `config.json` (Llama/Mistral/Qwen2/Mixtral/DeepSeek-V3/gpt-oss/Qwen3.5 families). A sliding
    window is read where `layer_types` names the windowed layers (gpt-oss); gpt-oss carries attention sinks;
    `linear_attention` layers are Gated DeltaNet (Qwen3.5, whose language model sits under `text_config`)."""
    if "num_hidden_layers" not in c and isinstance(c.get("text_config"), dict):
        c = {**c["text_config"], "_name_or_path": c.get("_name_or_path") or c.get("_model")}
    if "num_hidden_layers" not in c or "hidden_size" not in c:
        raise InputError(path, "num_hidden_layers", "not a transformer config.json", "give a Hugging Face config.json")
    heads = int(c["num_attention_heads"])
    moe = None
    n_exp = c.get("n_routed_experts") or c.get("num_local_experts") or c.get("num_experts")
    if n_exp:
        moe = MoESpec(num_experts=int(n_exp), top_k=int(c.get("num_experts_per_tok", 2)),
                      expert_intermediate_size=int(c.get("moe_intermediate_size") or c["intermediate_size"]),
                      shared_experts=int(c.get("n_shared_experts", 0) or 0)
                      or (1 if str(c.get("model_type", "")).startswith("qwen3_5")
                          and c.get("shared_expert_intermediate_size") else 0))
    common = dict(name=str(c.get("_name_or_path") or path.parent.name), num_layers=int(c["num_hidden_layers"]),
                  hidden_size=int(c["hidden_size"]), vocab_size=int(c["vocab_size"]),
                  intermediate_size=int(c.get("intermediate_size") or c["moe_intermediate_size"]), ffn_kind="gated",
                  first_dense_layers=int(c.get("first_k_dense_replace", 0) or 0), moe=moe,
                  mtp_modules=int(c.get("num_nextn_predict_layers") or c.get("mtp_num_hidden_layers") or 0),
                  max_context_tokens=int(c.get("max_position_embeddings", 8192)), source=str(path),
                  attention_sinks=c.get("model_type") == "gpt_oss",
                  qk_norm_across_heads=bool(c.get("use_qk_norm")) and c.get("qk_norm_type") == "per_layer",
                  attention_output_gate=bool(c.get("attn_output_gate", False)))
    layer_types = c.get("layer_types") or []
    if c.get("sliding_window") and "sliding_attention" in layer_types:  # (gpt-oss: alternating windowed layers)
        common.update(sliding_window_tokens=int(c["sliding_window"]),
                      sliding_window_layers=tuple(i for i, t in enumerate(layer_types) if t == "sliding_attention"))
    if "linear_attention" in layer_types:  # (Qwen3.5: Gated DeltaNet between every 4th, full, layer)
        common["linear_attention"] = LinearAttentionSpec(
            layers=tuple(i for i, t in enumerate(layer_types) if t == "linear_attention"),
            num_key_heads=int(c["linear_num_key_heads"]), num_value_heads=int(c["linear_num_value_heads"]),
            key_head_dim=int(c["linear_key_head_dim"]), value_head_dim=int(c["linear_value_head_dim"]),
            conv_kernel_tokens=int(c["linear_conv_kernel_dim"]),
            state_dtype=_state_dtype(path, "mamba_ssm_dtype", c.get("mamba_ssm_dtype", "float32")))
    if c.get("kv_lora_rank"):
        nope, rope = int(c["qk_nope_head_dim"]), int(c["qk_rope_head_dim"])
        return ModelSpec(attention_kind="mla", num_heads=heads, num_kv_heads=1, head_dim=nope + rope,
                         q_lora_rank=int(c.get("q_lora_rank") or 0), kv_lora_rank=int(c["kv_lora_rank"]),
                         qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=int(c["v_head_dim"]), **common)
    head_dim = int(c.get("head_dim") or int(c["hidden_size"]) // heads)
    return ModelSpec(attention_kind="gqa", num_heads=heads, num_kv_heads=int(c.get("num_key_value_heads", heads)),
                     head_dim=head_dim, **common)
