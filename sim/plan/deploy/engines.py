"""The engine launch command of a pool, with the flags the simulation assumed: one function per engine in the
`ENGINES` registry, and `PRESET_ENGINES` mapping each conf/engine preset to the engine and pinned version whose
flags it uses (the generic preset maps to vLLM). Only flags of `accepted.py`'s table for that version are written;
what a flag cannot say goes into `Launch.notes`.
"""
from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from inferplan.errors import InputError
from sim.plan.deploy.source import PoolServing

# conf/engine preset -> (engine, version of accepted.py). generic: the simulator's own scheduler, whose
# continuous/chunked_prefill policies are vLLM V0's (prompts prefilled whole unless chunked), so vLLM 0.6.0.
PRESET_ENGINES: dict[str, tuple[str, str]] = {
    "generic": ("vllm", "0.6.0"),
    "vllm_v0": ("vllm", "0.6.0"),
    "vllm_v1": ("vllm", "0.8.5"),
    "sglang": ("sglang", "0.3.0"),
    "sglang_v04": ("sglang", "0.4.0"),
    "trtllm": ("trtllm", "1.3.0rc27"),
    # The serving-run presets (vLLM 0.11+, SGLang 0.5.x, TensorRT-LLM 1.x): the nearest version whose accepted
    # flags accepted.py holds; the launch file names the version it was checked against.
    "vllm_v1_serve": ("vllm", "0.8.5"),
    "vllm_v1_async_serve": ("vllm", "0.8.5"),
    "sglang_v05_serve": ("sglang", "0.4.0"),
    "sglang_v059_serve": ("sglang", "0.4.0"),
    "trtllm_v1_serve": ("trtllm", "1.3.0rc27"),
}

# Container images (assumption: the projects' public release images at the pinned version; pin your registry's).
IMAGES = {"vllm": "vllm/vllm-openai:v{v}", "sglang": "lmsysorg/sglang:v{v}-cu121",
          "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:{v}"}
PORTS = {"vllm": 8000, "sglang": 30000, "trtllm": 8000}


@dataclass(frozen=True)
class Launch:
    """One instance's launch: `argv` (exec form), the extra-options YAML (TRT-LLM), and notes on what the flags
    cannot say."""

    engine: str
    version: str
    argv: tuple[str, ...]
    port: int
    image: str
    extra_options: dict | None = None           # trtllm-serve --extra_llm_api_options content
    notes: tuple[str, ...] = field(default=())
    health_path: str = "/health"

    def flags(self) -> list[tuple[str, str | None]]:
        """(flag, value or None for a switch) of argv, in order."""
        out, args = [], list(self.argv)
        for i, a in enumerate(args):
            if a.startswith("--"):
                nxt = args[i + 1] if i + 1 < len(args) else None
                out.append((a, None if nxt is None or nxt.startswith("--") else nxt))
        return out

    def shell(self) -> str:
        return shlex.join(self.argv)


def _model(s: PoolServing, notes: list[str]) -> str:
    if s.hf_id is None:
        notes.append(f"conf/model/{s.model}.yaml gives no Hugging Face id: replace `{s.model}` by the model's path")
        return s.model
    return s.hf_id


def _weights(s: PoolServing, notes: list[str]) -> str | None:
    """The `--quantization` value of the simulated weight format (None: served as stored, bf16/fp16)."""
    w = s.weights_dtype
    if w in ("bf16", "fp16", "fp32"):
        return None
    if w.startswith("fp8"):
        if w == "fp8_block":
            notes.append("weights fp8_block (128x128-block FP8, as simulated): serve a block-FP8 checkpoint of the "
                         "model (its FP8 release); `fp8` on a BF16 checkpoint quantizes per tensor instead")
        return "fp8"
    if w.startswith("int4"):
        notes.append(f"weights {w} (W4A16, group 128, as simulated): needs an AWQ INT4 checkpoint of the model; "
                     "replace the model id with it")
        return "awq"
    notes.append(f"weights {w}: no flag written; serve a checkpoint already in that format")
    return None


def _act_dtype(s: PoolServing) -> str:
    """Activations: bf16 as simulated, but fp16 for AWQ INT4 (the AWQ kernels of these versions take fp16 only)."""
    return "float16" if s.weights_dtype == "fp16" or s.weights_dtype.startswith("int4") else "bfloat16"


def _common_notes(s: PoolServing, notes: list[str]) -> None:
    if s.kv_tier2_bytes > 0:
        where = "shared by the pool" if s.kv_tier2_shared else "per instance"
        notes.append(f"KV tier 2 of {s.kv_tier2_bytes / 2**30:,.0f} GiB {where} (host/disk prefix cache) was "
                     "simulated: no flag of this engine version sets it (LMCache / HiCache / 3FS are separate setups)")
    if s.role != "unified":
        hand = f"hands prefilled requests to pool {s.decode_pool}" if s.role == "prefill" else \
            "decodes requests a prefill pool hands over"
        notes.append(f"role {s.role} ({hand}): prefill/decode disaggregation and its KV transfer are not "
                     "expressible with these versions' flags; this command serves the pool's instances only")


def vllm_launch(s: PoolServing, version: str) -> Launch:
    notes: list[str] = []
    v1 = version != "0.6.0"
    argv = ["vllm", "serve", _model(s, notes), "--served-model-name", s.name, "--host", "0.0.0.0",
            "--port", str(PORTS["vllm"]), "--tensor-parallel-size", str(s.tp), "--max-model-len",
            str(s.max_model_len_tokens), "--gpu-memory-utilization", f"{s.gpu_memory_utilization:g}",
            "--block-size", str(s.block_size_tokens)]
    if s.pp > 1:
        argv += ["--pipeline-parallel-size", str(s.pp)]
    if s.dp > 1 or s.ep > 1:
        if not v1:
            raise InputError("deploy", "engine", f"pool {s.name}: dp={s.dp}/ep={s.ep} has no vLLM 0.6.0 flag",
                             "run the pool with engine=vllm_v1 (vLLM 0.8.5: --data-parallel-size, "
                             "--enable-expert-parallel)")
        if 1 < s.ep < s.tp * s.dp:
            raise InputError("deploy", "engine", f"pool {s.name}: ep={s.ep} of tp x dp = {s.tp * s.dp} (experts split "
                             f"over {s.tp * s.dp // s.ep} devices each) has no vLLM flag: --enable-expert-parallel "
                             "spreads whole experts over every device",
                             f"set the pool's deployment ep: {s.tp * s.dp} or 1, or deploy it with "
                             "engine=trtllm (--ep_size)")
        argv += ["--data-parallel-size", str(s.dp)] + (["--enable-expert-parallel"] if s.ep > 1 else [])
    quant = _weights(s, notes)
    if quant:
        argv += ["--quantization", quant]
    argv += ["--dtype", _act_dtype(s)]
    argv += ["--kv-cache-dtype", "fp8" if s.kv_dtype.startswith("fp8") else "auto"]
    if s.max_num_seqs is not None:
        argv += ["--max-num-seqs", str(s.max_num_seqs)]
    if s.max_num_batched_tokens is not None:
        argv += ["--max-num-batched-tokens", str(s.max_num_batched_tokens)]
    if not v1:   # (V1 always chunks prefills: arg_utils forces it)
        argv += ["--enable-chunked-prefill", "true" if s.chunked_prefill else "false"]
    if s.prefix_caching:
        argv += ["--enable-prefix-caching"]
    elif v1:     # (on by default in V1)
        argv += ["--no-enable-prefix-caching"]
    if s.num_gpu_blocks_override is not None:
        argv += ["--num-gpu-blocks-override", str(s.num_gpu_blocks_override)]
    if s.draft_tokens:
        if v1:   # (0.8.5 SpeculativeConfig: without a draft model, DeepSeek-V3 drafts with its own MTP layers)
            argv += ["--speculative-config", json.dumps({"num_speculative_tokens": s.draft_tokens})]
            if not s.model.startswith(("deepseek_v3", "deepseek_r1")):
                notes.append(f"MTP drafting in vLLM {version} is for DeepSeek-V3/R1 only")
        else:
            notes.append(f"{s.draft_tokens} MTP draft token(s) simulated: vLLM 0.6.0 has no MTP drafting")
    if s.nodes_per_instance > 1:
        argv += ["--distributed-executor-backend", "ray"]
    if s.engine_preset == "generic" and s.batching_policy not in ("continuous", "chunked_prefill"):
        notes.append(f"batching {s.batching_policy}: vLLM has no such policy; max-num-seqs / "
                     "max-num-batched-tokens are its batch bounds")
    _common_notes(s, notes)
    return Launch("vllm", version, tuple(argv), PORTS["vllm"], IMAGES["vllm"].format(v=version), None, tuple(notes))


def sglang_launch(s: PoolServing, version: str) -> Launch:
    notes: list[str] = []
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", _model(s, notes), "--served-model-name", s.name,
            "--host", "0.0.0.0", "--port", str(PORTS["sglang"]), "--tp-size", str(s.tp),
            "--context-length", str(s.max_model_len_tokens),
            "--mem-fraction-static", f"{s.gpu_memory_utilization:g}"]
    if s.dp > 1:
        argv += ["--dp-size", str(s.dp)]
        if version != "0.3.0":
            argv += ["--enable-dp-attention"]
    if s.ep > 1 or s.pp > 1:
        notes.append(f"ep={s.ep}, pp={s.pp} simulated: SGLang {version} has no expert- or pipeline-parallel flag")
    quant = _weights(s, notes)
    if quant:
        argv += ["--quantization", quant]
    argv += ["--dtype", _act_dtype(s)]
    # (SGLang <= 0.4.0 lists fp8_e5m2 as its only FP8 KV format)
    argv += ["--kv-cache-dtype", "fp8_e5m2" if s.kv_dtype.startswith("fp8") else "auto"]
    if s.max_num_seqs is not None:
        argv += ["--max-running-requests", str(s.max_num_seqs)]
    if s.max_num_batched_tokens is not None:
        argv += ["--chunked-prefill-size", str(s.max_num_batched_tokens if s.chunked_prefill else -1)]
    if not s.prefix_caching:
        argv += ["--disable-radix-cache"]
    if version != "0.3.0":
        argv += ["--enable-metrics"]   # (the autoscaler's queries read them)
        if s.overlap == "none":
            argv += ["--disable-overlap-schedule"]
    if s.draft_tokens:
        notes.append(f"{s.draft_tokens} MTP draft token(s) simulated: SGLang {version} has no speculative flag")
    _common_notes(s, notes)
    return Launch("sglang", version, tuple(argv), PORTS["sglang"], IMAGES["sglang"].format(v=version), None,
                  tuple(notes))


EXTRA_OPTIONS_PATH = "/etc/inferplan/extra-llm-api-options.yaml"


def trtllm_launch(s: PoolServing, version: str) -> Launch:
    notes: list[str] = []
    argv = ["trtllm-serve", _model(s, notes), "--backend", "pytorch", "--host", "0.0.0.0",
            "--port", str(PORTS["trtllm"]), "--tp_size", str(s.tp), "--max_seq_len", str(s.max_model_len_tokens),
            "--kv_cache_free_gpu_memory_fraction", f"{s.kv_free_memory_fraction:g}"]
    if s.pp > 1:
        argv += ["--pp_size", str(s.pp)]
    if s.ep > 1:  # (a mix: TensorRT-LLM takes moe_tp_size = tp_size / ep_size)
        argv += ["--ep_size", str(s.ep)]
    if s.max_num_seqs is not None:
        argv += ["--max_batch_size", str(s.max_num_seqs)]
    if s.max_num_batched_tokens is not None:
        argv += ["--max_num_tokens", str(s.max_num_batched_tokens)]
    argv += ["--extra_llm_api_options", EXTRA_OPTIONS_PATH]
    _weights(s, notes)  # (TRT-LLM reads the format from the checkpoint: the notes say which one)
    extra: dict = {
        "kv_cache_config": {"free_gpu_memory_fraction": s.kv_free_memory_fraction,
                            "tokens_per_block": s.block_size_tokens, "enable_block_reuse": s.prefix_caching,
                            "dtype": "fp8" if s.kv_dtype.startswith("fp8") else "auto"},
        "enable_chunked_prefill": s.chunked_prefill,
        "scheduler_config": {"capacity_scheduler_policy": "GUARANTEED_NO_EVICT"},
        "disable_overlap_scheduler": s.overlap == "none",
    }
    if s.dp > 1:
        extra["enable_attention_dp"] = True
    if s.draft_tokens:
        extra["speculative_config"] = {"decoding_type": "MTP", "num_nextn_predict_layers": s.draft_tokens}
    notes.append("TensorRT-LLM flags come from its documentation only (no release could be read): check them "
                 "against `trtllm-serve --help` of your image")
    if s.nodes_per_instance > 1:
        notes.append("an instance over several nodes: start trtllm-serve under MPI across the group "
                     "(the LeaderWorkerSet gives one pod per node)")
    _common_notes(s, notes)
    return Launch("trtllm", version, tuple(argv), PORTS["trtllm"], IMAGES["trtllm"].format(v=version), extra,
                  tuple(notes))


ENGINES: dict[str, Callable[[PoolServing, str], Launch]] = {
    "vllm": vllm_launch,
    "sglang": sglang_launch,
    "trtllm": trtllm_launch,
}


def launch(s: PoolServing) -> Launch:
    """The launch of pool `s` with the engine its preset maps to."""
    if s.engine_preset not in PRESET_ENGINES:
        raise InputError("deploy", "engine", f"pool {s.name}: no launch mapping for engine preset "
                         f"{s.engine_preset!r}", f"add it to PRESET_ENGINES (known: {', '.join(PRESET_ENGINES)})")
    engine, version = PRESET_ENGINES[s.engine_preset]
    moved = s.engine_preset == "generic" and (s.dp > 1 or s.ep > 1 or s.draft_tokens > 0)
    if moved:   # (0.6.0 has no data/expert parallelism or MTP flags; 0.8.5 is the pinned version that has them)
        version = "0.8.5"
    out = ENGINES[engine](s, version)
    extra = []
    if moved:
        extra.append("generic preset on a dp/ep/MTP pool: vLLM 0.8.5, whose V1 scheduler always chunks prefills")
    if s.hardware.kind != "gpu":
        extra.append(f"{s.hardware.kind} device ({s.hardware.name}): use the engine's {s.hardware.kind} build and "
                     "image; GPU memory flags do not apply there")
    return dataclasses.replace(out, notes=out.notes + tuple(extra)) if extra else out


def multinode(l: Launch, nodes: int) -> tuple[list[str], list[str]]:
    """(leader, worker) container commands for an instance over `nodes` nodes of a LeaderWorkerSet (which sets
    LWS_LEADER_ADDRESS and LWS_WORKER_INDEX in every pod)."""
    if l.engine == "vllm":   # a Ray cluster per instance, vLLM on its head (the LeaderWorkerSet vLLM example)
        leader = f"ray start --head --port=6379 && {l.shell()}"
        worker = "ray start --address=$LWS_LEADER_ADDRESS:6379 --block"
        return ["/bin/sh", "-c", leader], ["/bin/sh", "-c", worker]
    if l.engine == "sglang":
        addr = "--nccl-init-addr" if l.version == "0.3.0" else "--dist-init-addr"
        base = f"{l.shell()} --nnodes {nodes} {addr} $LWS_LEADER_ADDRESS:5000 --node-rank"
        return ["/bin/sh", "-c", f"{base} 0"], ["/bin/sh", "-c", f"{base} $LWS_WORKER_INDEX"]
    return list(l.argv), ["/bin/sh", "-c", "sleep infinity  # a rank started by the leader's MPI launcher"]
