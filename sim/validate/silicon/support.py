"""Can the simulator express a row, and how: `plan_row(row)` gives a `RowPlan` (hardware, model, formats,
parallelism, engine preset, assumptions) or an `Unsupported` with the reason it is counted under.

Checks, in order (a row is counted under the first that fails; `Unsupported.also` lists the rest):
hardware (a `conf/hardware` spec), mode (`disagg` needs worker counts and a client concurrency: then the row is a
prefill pool of its prefill workers handing each request to a decode pool of its decode workers), client
concurrency, architecture (`models.UNSUPPORTED_ARCHITECTURES`), model
(a `conf/model` yaml with the row's `hf_id`), format (NVFP4 on hardware with FP4 units for a model with an NVFP4
checkpoint, `models.NVFP4_CHECKPOINTS`; a model with one published checkpoint, `models.CHECKPOINT_WEIGHTS`, runs
in its formats whatever the row's label, its MXFP4 experts in the engine's kernel, `models.MXFP4_EXPERTS_ON_FP4_UNITS`),
parallelism (expert parallelism is 1 or every device of the instance), replicas (an aggregated row served through
Dynamo records its worker count), engine (a `conf/engine` preset).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from calibrate.ops import DTYPES
from inferplan.errors import InputError
from inferplan.specs import available, load_hardware, load_model
from sim.validate.published import engine_preset
from sim.validate.silicon import models
from sim.validate.silicon.table import SOURCE_CONCURRENCY, SiliconRow

# Reasons a row is not simulated: key -> what the report prints.
REASONS = {
    "hardware": "hardware the project lacks (no conf/hardware spec)",
    "disagg_no_workers": "disaggregated without worker counts",
    "disagg_no_concurrency": "disaggregated without a client concurrency",
    "no_concurrency": "no client concurrency (batch_size empty)",
    "architecture": "unsupported architecture (hybrid linear attention; a model the project lacks)",
    "model": "model the project lacks (no conf/model yaml with its hf_id)",
    "fp4_format": "FP4 format without a checkpoint of the model in it (models.NVFP4_CHECKPOINTS)",
    "fp4_units": "NVFP4 on hardware without FP4 units (no NVFP4 kernel; the checkpoint is not MXFP4)",
    "format": "weight format the cost model lacks",
    "parallelism": "parallelism the deployment cannot express (MoE TP x EP mix)",
    "replicas": "served through Dynamo without its worker count (the replicas behind its router not recorded)",
    "engine": "engine without a conf/engine preset",
}


@dataclass(frozen=True)
class Unsupported:
    reason: str                 # a REASONS key
    detail: str                 # the row's specifics, one line
    also: tuple[str, ...] = ()  # further REASONS keys that apply


@dataclass(frozen=True)
class DecodePool:
    """A disaggregated row's decode workers: `instances` of `tp` x dp devices each, taking every request after its
    prefill (the pool's KV arrives over the link the simulator prices, `kv_handoff_s`)."""

    instances: int
    tp: int
    deployment: dict


@dataclass(frozen=True)
class RowPlan:
    """A row as the simulator runs it: one instance of `tp x dp` devices, `clients` closed-loop clients."""

    row: SiliconRow
    hardware: str
    model: str
    engine: str                  # conf/engine preset
    tp: int
    weights_dtype: str
    deployment: dict             # the pool's deployment mapping (dp, ep, pp, weights, sparse_attention), {} if none
    assumptions: tuple[str, ...]
    kv_dtype: str = "bf16"       # the KV cache's storage format (`_kv_dtype`)
    instances: int = 1           # instances of the pool the clients send to (a disaggregated row's prefill workers)
    decode: DecodePool | None = None  # a disaggregated row's decode workers (the first pool is then its prefill)
    engine_keys: tuple[tuple[str, float | str], ...] = ()  # preset keys its version sets otherwise (VERSION_KEYS)


@functools.cache
def _is_moe(model: str) -> bool:
    return load_model(model).moe is not None


def hardware_for(system: str) -> str | None:
    """The `conf/hardware` name of a `system`: the same name, else without its `_sxm` suffix (h200_sxm -> h200)."""
    names = available("hardware")
    for name in (system, system.removesuffix("_sxm")):
        if name in names:
            return name
    return None


@functools.cache
def _has_fp4_units(hardware: str) -> bool:
    """Whether `conf/hardware/<hardware>` lists an FP4 peak (Blackwell), False for a name without a spec."""
    return hardware in available("hardware") and "fp4" in load_hardware(hardware).peak_flops_per_s


def _format(mode: str, model: str | None, fp4_units: bool) -> tuple[str | None, str]:
    """(cost-model weight format or None, reason key if None) of a quant-mode column value: NVFP4 where the
    hardware has FP4 units and the model an NVFP4 checkpoint (`models.NVFP4_CHECKPOINTS`)."""
    if mode == "nvfp4":
        if not fp4_units:
            return None, "fp4_units"
        return ("nvfp4", "") if model in models.NVFP4_CHECKPOINTS else (None, "fp4_format")
    if "fp4" in mode:
        return None, "fp4_format"
    if mode in DTYPES:
        return mode, ""
    return None, "format"


def _kv_dtype(row: SiliconRow, weights: str, notes: list[str]) -> str:
    """The KV cache format the row's server ran: the checkpoint's dtype (every engine's default, `auto`,
    ../shared/engine-defaults), except where the checkpoint sets an FP8 KV cache. TensorRT-LLM serves per-tensor
    FP8 weights from a ModelOpt checkpoint (its PyTorch backend does not quantise a BF16 one), whose quantisation
    config sets `kv_cache_quant_algo` FP8 (ModelOpt's default; the FP8 re-quantisation noted in
    ../shared/model-configs/llama-3.1-70b-instruct.json), and `KvCacheConfig.dtype` `auto` follows it (trtllm.csv).
    vLLM's `auto` is the model dtype whatever the checkpoint says (vllm.csv). SGLang's `auto` follows the checkpoint
    too (sglang.csv), but its FP8 rows here are block-scaled releases (`fp8_block` experts), not ModelOpt's, and keep
    the model dtype. ModelOpt's NVFP4 checkpoints may set an FP8 KV cache as well; the rows do not say, so not
    assumed."""
    if row.engine == "trtllm" and weights == "fp8":
        notes.append("TensorRT-LLM with per-tensor FP8 weights: a ModelOpt FP8 checkpoint, whose KV cache is FP8 "
                     "(kv_cache_quant_algo; KvCacheConfig.dtype auto follows the checkpoint)")
        return "fp8"
    return "bf16"


# The serving presets of the versions in the data (conf/engine/*_serve.yaml: the base preset's scheduler keys plus
# the front-end time fitted on the rows each serves, fit.py), by the base preset and the least version they serve.
# vLLM from 0.14.0 schedules asynchronously by default (vllm_v1_async_serve). SGLang from 0.5.9 keeps 0.5.x's
# scheduler keys with its own front-end time (sglang_v059_serve: fit.py's module docstring says why).
SERVE_PRESETS: dict[str, tuple[tuple[tuple[int, ...], str], ...]] = {
    "vllm_v1": (((0, 11), "vllm_v1_serve"), ((0, 14), "vllm_v1_async_serve")),
    "sglang_v04": (((0, 5), "sglang_v05_serve"), ((0, 5, 9), "sglang_v059_serve")),
    "trtllm": (((1, 0), "trtllm_v1_serve"),)}
NEWEST_SERVE = {"vllm": "vllm_v1_async_serve", "sglang": "sglang_v059_serve", "trtllm": "trtllm_v1_serve"}


# Preset keys whose value changes inside a serving preset's version range: (engine, least, below, keys). vLLM's
# profile-run sampler sorts the vocabulary up to 0.16 and runs top-k/top-p in place in Triton from 0.17.0
# (conf/engine/vllm_v1_async_serve.yaml `sampler_bytes_per_logit`, sourced from the 0.16.0 and 0.17.0 wheels).
# SGLang sizes `mem_fraction_static`, `chunked_prefill_size` and the CUDA-graph batch sizes by the 0.5.1 tiers up to
# 0.5.5 and from the chunk and graph sizes from 0.5.6 (`server_args.py` `_handle_gpu_memory_settings` and
# `_generate_cuda_graph_batch_sizes`, the same in the 0.5.6.post2 and 0.5.8.post1 wheels as at 0.5.9), inside
# sglang_v05_serve's 0.5.0-0.5.8.
VERSION_KEYS: tuple[tuple[str, tuple[int, ...], tuple[int, ...], dict[str, float | str]], ...] = (
    ("vllm", (0, 14), (0, 17), {"sampler_bytes_per_logit": 28.0}),
    ("sglang", (0, 5, 6), (0, 5, 9), {"mem_fraction_rule": "sglang_0_5_6", "device_rule": "sglang_0_5_6"}),)


def _version_keys(row: SiliconRow, notes: list[str]) -> tuple[tuple[str, float | str], ...]:
    """The preset keys the row's recorded version sets otherwise than its serving preset (VERSION_KEYS)."""
    if not re.match(r"^\d+\.\d+", row.engine_version):
        return ()
    version = tuple(int(x) for x in re.findall(r"\d+", row.engine_version)[:3])
    keys: dict[str, float | str] = {}
    for engine, least, below, values in VERSION_KEYS:
        if row.engine == engine and least <= version < below:
            keys.update(values)
            said = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items())
            notes.append(f"{engine} {row.engine_version}: {said} (its version's own value inside the serving "
                         "preset's range)")
    return tuple(sorted(keys.items()))


def _serve_preset(base: str, version: str) -> str:
    """`base`, or the serving preset of the newest least version the row's version reaches (major, minor, patch;
    a suffix such as `.post1` ignored)."""
    major = tuple(int(x) for x in re.findall(r"\d+", version)[:3])
    chosen = base
    for least, serve in SERVE_PRESETS.get(base, ()):
        if major >= least:
            chosen = serve
    return chosen


# A row measured through NVIDIA Dynamo (its source names the runtime image's `dynamo_version`): the clients reach
# Dynamo's frontend, whose router spreads them over the deployment's workers.
DYNAMO = re.compile(r"(?:^|[;\s])dynamo_version=")


def _replicas(row: SiliconRow, dp: int, notes: list[str]) -> tuple[int, str | None]:
    """(workers the clients are spread over, problem or None) of an aggregated row. One, except through Dynamo:
    there `batch_size` is each worker's concurrency and the source's `silicon_concurrency` the client's, so the row
    ran `silicon_concurrency / (batch_size x attention DP)` workers (the 21 such rows: 2, 4 or 32; the ids name the
    total, `_c192_tp4`, with `batch_size` 48). Without `silicon_concurrency` the count is not recorded (the batch
    size may be either), and the row is refused rather than guessed."""
    if row.mode != "agg" or not DYNAMO.search(row.source):
        return 1, None
    if not SOURCE_CONCURRENCY.search(row.source) or not row.batch_size or not row.clients:
        return 1, "Dynamo worker count: no silicon_concurrency beside batch_size in the source"
    workers, rest = divmod(row.clients, row.batch_size * dp)
    if rest:
        return 1, (f"Dynamo worker count: silicon_concurrency {row.clients} is not a multiple of batch_size "
                   f"{row.batch_size} x attention DP {dp}")
    if workers > 1:
        notes.append(f"served through Dynamo: {workers} workers of {row.batch_size * dp} clients each "
                     f"(silicon_concurrency {row.clients} / batch_size {row.batch_size}), the clients spread by "
                     "the simulator's least-outstanding router (Dynamo's router mode is not recorded)")
    return workers, None


def _version_preset(row: SiliconRow, notes: list[str]) -> str | None:
    version = row.engine_version
    if row.engine in NEWEST_SERVE and not re.match(r"^\d+\.\d+", version):
        preset = NEWEST_SERVE[row.engine]
        notes.append(f"engine version {version or 'not recorded'!r}: the newest {row.engine} preset, {preset}")
        return preset
    try:
        base = engine_preset({"id": row.id, "engine": row.engine, "engine_version": version, "flags": ""})
    except InputError:
        return None
    return _serve_preset(base, version)


ID_TP_EP = re.compile(r"_tp(\d+)(?:_0)?_ep(\d+)(?:_0)?_\d+$")   # `..._c64_tp4_ep4_1003`: the deployment an id names


def _node_devices(system: str) -> int:
    """GPUs per node of the row's system (`conf/hardware` devices_per_node; a system without a spec: 8)."""
    hardware = hardware_for(system)
    return load_hardware(hardware).devices_per_node if hardware else 8


def _read_as_named(row: SiliconRow, notes: list[str]) -> tuple[int, int, int | None, int]:
    """(tp, attention dp, moe_ep, moe_tp) of a MoE row, its two encodings read as the deployment its id names
    (`_parallelism`)."""
    tp, dp, ep, moe_tp = row.tp or 1, row.attention_dp or 1, row.moe_ep, row.moe_tp or 1
    if dp > 1 and tp == dp and ep == tp * dp and moe_tp == 1:
        notes.append(f"tp_size {tp}, attention_dp_size {dp}, moe_ep_size {ep}: TP {tp} with the experts EP {tp}, "
                     f"{tp} GPUs, no data-parallel attention (the same runs recorded elsewhere in the file read "
                     f"tp_size {tp}, attention_dp_size 1, moe_ep_size {tp})")
        return tp, 1, tp, 1
    named = ID_TP_EP.search(row.id)
    n = moe_tp
    says_n = bool(named and named.group(1) == named.group(2) == str(n))
    if dp == 1 and ep == n > 1 and tp == n * n and (says_n or (not named and tp > _node_devices(row.system))):
        why = ("the row's id names TP N EP N" if says_n else
               f"TP {tp} would span {tp // _node_devices(row.system)} nodes of {row.system}, where the runs are "
               "single-node")
        notes.append(f"tp_size {tp}, moe_tp_size {n}, moe_ep_size {n}: TP {n} with the experts EP {n}, {n} GPUs "
                     f"({why}; tp_size is moe_tp x moe_ep in these rows: the same runs recorded elsewhere in the file "
                     f"read tp_size {n}, moe_tp_size 1, with the same TTFT and TPOT)")
        return n, dp, n, 1
    if tp == 1 and named and named.group(1) == named.group(2) == str(n) and ep == n > 1 and dp == n * n:
        notes.append(f"attention_dp_size {dp}, moe_tp_size {n}, moe_ep_size {n}: attention DP {n} with the experts "
                     f"EP {n}, the {n} GPUs the row's id names (attention_dp_size is moe_tp x moe_ep in these rows; "
                     f"the same runs recorded in the 2026-03-25 file read attention_dp_size {n}, moe_tp_size 1, "
                     f"moe_ep_size {n}, with the same TTFT and TPOT)")
        return 1, n, n, 1
    return tp, dp, ep, moe_tp


def _split(tp: int, pp: int, dp: int, ep: int | None, moe_tp: int, moe: bool) -> tuple[int, dict, str | None]:
    """(tp, deployment keys, problem) of one worker: TP x attention DP devices (x PP), experts EP 1 or over every
    device, whole (moe_tp 1) or each split over moe_tp devices of its EP group (a MoE TP x EP mix: moe_tp x moe_ep
    = tp, attention not data-parallel)."""
    dep: dict = {}
    if dp > 1:
        dep["dp"] = dp
    if pp > 1:
        dep["pp"] = pp
    if moe and (ep or 0) > 1:
        devices = tp * dp
        if ep * moe_tp != devices:
            return tp, dep, (f"moe_tp {moe_tp} x moe_ep {ep} over tp {tp} x attention dp {dp}: the experts' "
                             "split must cover the worker's devices (moe_tp x moe_ep = tp x dp)")
        if moe_tp > 1 and dp > 1:
            return tp, dep, (f"moe_tp {moe_tp} x moe_ep {ep} with attention dp {dp}: a MoE TP x EP mix under "
                             "data-parallel attention is not modelled")
        dep["ep"] = ep
    return tp, dep, None


def _worker(tp: int, dep: dict) -> str:
    """`TP 1 x DP 4, EP 4`: one worker's split."""
    return f"TP {tp}" + "".join(f" x {k.upper()} {dep[k]}" for k in ("dp", "pp") if k in dep) + \
        (f", EP {dep['ep']}" if "ep" in dep else "")


def _disagg(row: SiliconRow, moe: bool, notes: list[str]) -> tuple[int, dict, DecodePool | None, str | None]:
    """A disaggregated row's (prefill tp, prefill deployment keys, decode pool, problem), from its `prefill_*` and
    `decode_*` columns (an empty column: 1)."""
    pools = []
    for phase, split, workers in zip(("prefill", "decode"), row.disagg_split, row.disagg_workers):
        tp, pp, dp, moe_tp, ep = (split + (None,) * 5)[:5]
        tp_, dep, problem = _split(tp or 1, pp or 1, dp or 1, ep, moe_tp or 1, moe)
        if problem:
            return tp_, dep, None, f"{phase}: {problem}"
        pools.append((workers or 1, tp_, dep))
    (p_n, p_tp, p_dep), (d_n, d_tp, d_dep) = pools
    notes.append(f"disaggregated: {p_n} prefill worker(s) of {_worker(p_tp, p_dep)} hand each request to {d_n} "
                 f"decode worker(s) of {_worker(d_tp, d_dep)}; its KV moves over the link the simulator prices")
    return p_tp, p_dep, DecodePool(d_n, d_tp, d_dep), None


def _parallelism(row: SiliconRow, moe: bool, notes: list[str]) -> tuple[int, dict, str | None]:
    """(tp, deployment keys, problem) from the row's TP/PP/attention-DP/MoE columns.

    One encoding is read as the deployment the row's id names: `tp_size` N, `attention_dp_size` N and `moe_ep_size`
    N x N (the vLLM MiniMax-M2.5 and Kimi-K2.5 rows whose ids say `tpN_epN`) is TP N with the experts EP N on N GPUs,
    attention not data-parallel. Taken at face value it would be N x N GPUs (16 H100s for the H100 rows: two nodes,
    where the runs are single-node); the same measurements are recorded elsewhere in the file as `tp_size` N,
    `attention_dp_size` 1, `moe_ep_size` N (Kimi-K2.5 B200 TP 4 at 4-64 clients: the `kimi_k2_5_...` rows carry the
    very TTFT and TPOT of the `..._tp4_ep4_...` ones; MiniMax-M2.5 H100 TP 4: the 2026-03-25 rows within 1-3% of the
    2026-04-06 ones, measured a day apart with the same image). A second: `tp_size` N x N with `moe_tp_size` and
    `moe_ep_size` N, in rows whose id names `tpN_epN` (the 2026-04-06 gpt-oss and Qwen3.5 rows; its Qwen3.5 rows
    repeat the 2026-03-25 measurements, recorded there as `tp_size` N, `moe_tp_size` 1, `moe_ep_size` N), is TP N
    with the experts EP N on N GPUs; so is the same encoding in an id that names no split where N x N GPUs would
    span nodes (the InferenceX Qwen3.5-397B-A17B B200 rows of config 615, `tp_size` 16: single-node runs, and twins
    of the `tp4_ep4` rows to the microsecond). Otherwise the columns are a valid TP N x N with the experts TP N x EP
    N (a MoE TP x EP mix), and are read so.
    A third: `tp_size` 1, `attention_dp_size` N x N, `moe_tp_size` and `moe_ep_size` N, id `tpN_epN` (2026-04-06
    gpt-oss-120b TensorRT-LLM on B200), is attention DP N with the experts EP N on N GPUs:
    the 2026-03-25 file records the same runs (identical TTFT and TPOT) as `attention_dp_size` N, `moe_ep_size` N,
    `batch_size` clients / N."""
    tp, dp, ep, moe_tp = (_read_as_named(row, notes) if moe
                          else (row.tp or 1, row.attention_dp or 1, row.moe_ep, row.moe_tp or 1))
    return _split(tp, row.pp or 1, dp, ep, moe_tp, moe)


def plan_row(row: SiliconRow) -> RowPlan | Unsupported:
    """The row's simulation plan, or why it has none."""
    reasons: list[tuple[str, str]] = []
    hardware = hardware_for(row.system)
    if hardware is None:
        reasons.append(("hardware", f"system {row.system!r}"))
        hardware = row.system
    if row.mode == "disagg":
        if None in row.disagg_workers:
            reasons.append(("disagg_no_workers", "prefill/decode worker counts empty"))
        elif row.clients is None:
            reasons.append(("disagg_no_concurrency", "batch_size empty"))
    elif row.clients is None or row.clients < 1:
        reasons.append(("no_concurrency", "batch_size empty"))
    arch = models.unsupported_architecture(row.model_path)
    model = models.conf_model(row.model_path)
    if arch is not None:
        reasons.append(("architecture", f"{row.model}: {arch}"))
    elif model is None:
        reasons.append(("model", f"{row.model_path!r}"))
    notes: list[str] = []
    gemm_mode = row.gemm_quant_mode or row.precision
    if not gemm_mode:
        gemm_mode = "bf16"
        notes.append("precision not recorded: the checkpoint's bf16")
    moe = model is not None and _is_moe(model)
    fp4_units = _has_fp4_units(hardware)
    if model in models.CHECKPOINT_WEIGHTS:  # (one checkpoint whatever the row's precision label)
        weights, experts, why_ckpt = models.CHECKPOINT_WEIGHTS[model]
        why = why_moe = ""
        notes.append(why_ckpt)
        if experts == "mxfp4" and fp4_units and row.engine in models.MXFP4_EXPERTS_ON_FP4_UNITS:
            experts, why_kernel = models.MXFP4_EXPERTS_ON_FP4_UNITS[row.engine]
            notes.append(why_kernel)
    else:
        weights, why = _format(gemm_mode, model, fp4_units)
        experts, why_moe = _format(row.moe_quant_mode or gemm_mode, model, fp4_units) if moe else (weights, why)
        if "nvfp4" in (weights, experts):
            notes.append(f"nvfp4 label: the NVFP4 checkpoint {models.NVFP4_CHECKPOINTS[model]}, every weight group "
                         "in NVFP4 as the row's columns say")
    for w, key, mode in ((weights, why, gemm_mode), (experts, why_moe, row.moe_quant_mode)):
        if w is None and key not in {k for k, _ in reasons}:
            reasons.append((key, f"{mode!r}"))
    decode = None
    if row.mode == "disagg" and not reasons:
        tp, dep, decode, problem = _disagg(row, moe, notes)
    else:
        tp, dep, problem = _parallelism(row, moe, notes)
    if problem:
        reasons.append(("parallelism", problem))
    workers, unrecorded = _replicas(row, int(dep.get("dp", 1)), notes)
    if unrecorded:
        reasons.append(("replicas", unrecorded))
    preset = _version_preset(row, notes)
    if preset is None:
        reasons.append(("engine", f"{row.engine!r}"))
    if reasons:
        return Unsupported(reasons[0][0], reasons[0][1], tuple(k for k, _ in reasons[1:]))
    assert model is not None and weights is not None and experts is not None and preset is not None
    group_weights = {}
    if moe and experts != weights:
        group_weights["experts"] = experts
    if model in models.CHECKPOINT_FORMAT:
        written, actual, why_fmt = models.CHECKPOINT_FORMAT[model]
        if weights == written or experts == written:
            weights = actual if weights == written else weights
            experts = actual if experts == written else experts
            group_weights.pop("experts", None)
            if experts != weights:
                group_weights["experts"] = experts
            notes.append(why_fmt)
    if model in models.CHECKPOINT_BF16_GROUPS:
        fmt, groups, why_ckpt = models.CHECKPOINT_BF16_GROUPS[model]
        if experts == fmt:
            group_weights.update({g: "bf16" for g in groups} | {"experts": experts})
            notes.append(why_ckpt)
    if group_weights:
        dep["weights"] = group_weights
    if model in models.MODEL_DEPLOYMENT:
        extra, why_extra = models.MODEL_DEPLOYMENT[model]
        dep.update(extra)
        notes.append(why_extra)
    if decode is not None:  # (the decode workers run the same checkpoint)
        decode = DecodePool(decode.instances, decode.tp, {**decode.deployment, **{k: v for k, v in dep.items()
                                                                                if k not in ("dp", "pp", "ep")}})
    kv = _kv_dtype(row, weights, notes)
    engine_keys = _version_keys(row, notes)
    return RowPlan(row=row, hardware=hardware, model=model, engine=preset, tp=tp, weights_dtype=weights,
                   deployment=dep, assumptions=tuple(notes), kv_dtype=kv,
                   instances=row.disagg_workers[0] or 1 if decode is not None else workers, decode=decode,
                   engine_keys=engine_keys)
