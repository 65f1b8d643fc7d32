"""A pool's deployment: how one instance spreads the model over devices, and the serving options it runs with.

Read from the pool's free-form `deployment:` mapping. `preset: <name>` starts from `conf/deployment/<name>.yaml`;
keys given inline override the preset's (nested mappings key by key). Tensor parallelism stays the pool's own
`tp:` field. Every key, its unit and its default are documented in docs/cost-model.md ("Deployments"); an unknown
key or a bad value is an `InputError` naming the pool, the key and the fix. Model-dependent checks (experts
divisible over EP ranks, ...) happen in `sim.core.cost.layout`.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from calibrate.ops import DTYPES
from inferplan.errors import InputError
from inferplan.specs import CONF_DIR

PRESET_DIR = CONF_DIR / "deployment"
WEIGHT_GROUPS: tuple[str, ...] = ("attention", "ffn", "shared_experts", "experts", "lm_head")
OVERLAPS: tuple[str, ...] = ("none", "two_micro_batches")


@dataclass(frozen=True)
class ExpertOptions:
    """Routed-expert placement and load. Imbalance sources, first match wins: `imbalance` (a measured busiest/mean
    rank load after placement), `load_histogram` (relative load per expert: placed by `sim.core.cost.experts`),
    `zipf_s` (synthetic popularity 1/i^s), else perfectly balanced."""

    redundant: int = 0                           # extra expert replicas per MoE layer (EPLB), spread over EP ranks
    imbalance: float | None = None               # >= 1: busiest EP rank's routed rows / the mean
    load_histogram: tuple[float, ...] | None = None  # one relative load per routed expert
    zipf_s: float | None = None                  # >= 0: expert i (1-based, by popularity) gets load 1/i^s
    statistical_imbalance: bool = True           # add the busiest-of-ep-ranks fluctuation of random routing
    cold_fraction: float = 0.0                   # [0, 1): coldest routed experts kept in host memory
    cold_traffic_share: float | None = None      # share of routings that hit the cold experts


EP_KERNELS = ("generic", "deepep_normal", "deepep_low_latency")


@dataclass(frozen=True)
class CommOptions:
    """Expert-parallel all-to-all formats and how communication overlaps compute."""

    dispatch_dtype: str = "bf16"                 # activations sent to the experts
    combine_dtype: str = "bf16"                  # expert outputs sent back
    overlap: str = "none"                        # none | two_micro_batches
    node_dedup: bool = False                     # one network copy per remote node, then NVLink (DeepEP normal)
    ep_kernel_prefill: str = "generic"           # generic | deepep_normal | deepep_low_latency: EP all-to-all kernels
    ep_kernel_decode: str = "generic"            # ... of steps with / without prefill tokens (sim.core.cost.comm)
    comm_sms: int = 0                            # SMs the communication kernels hold while overlapped (0: none)


@dataclass(frozen=True)
class MtpOptions:
    """Speculative decoding with draft (MTP) modules: `draft_tokens` drafts per step, `acceptance[i]` the
    probability that draft i+1 is accepted given that the ones before it were."""

    draft_tokens: int = 1
    acceptance: tuple[float, ...] = ()

    @property
    def tokens_per_step(self) -> float:
        """Expected tokens a decoding sequence emits per step: 1 + sum_i prod_{j<=i} acceptance[j]."""
        total, p = 1.0, 1.0
        for a in self.acceptance:
            p *= a
            total += p
        return total


@dataclass(frozen=True)
class SparseAttention:
    """Each query attends its `top_k_tokens` highest-scoring context tokens, chosen by a light indexer (MQA with
    `indexer_heads` heads of `indexer_head_dim`, keys cached in `indexer_dtype`) that scores the whole context."""

    top_k_tokens: int = 2048
    indexer_heads: int = 64
    indexer_head_dim: int = 128
    indexer_dtype: str = "fp8_block"


@dataclass(frozen=True)
class HostOptions:
    """Per-iteration host work. Unset values come from the profile's measurement or the documented defaults."""

    cuda_graphs: bool = True                     # iterations up to `cuda_graph_max_tokens` replay a captured graph
    cuda_graph_max_tokens: int = 512             # per DP rank (vLLM's default largest capture size)
    step_overhead_s: float | None = None         # scheduling, sampling, detokenisation per iteration
    kernel_launch_host_s: float | None = None    # CPU time to launch one kernel without graphs


@dataclass(frozen=True)
class Deployment:
    """One instance's layout (tp x dp x pp devices) and options; `weights` maps every WEIGHT_GROUPS entry to a
    format of `calibrate.ops.DTYPES`."""

    tp: int = 1
    dp: int = 1
    ep: int = 1
    pp: int = 1
    pp_micro_batches: int | None = None
    pp_bubble: bool = False
    weights: dict[str, str] = field(default_factory=dict)
    experts: ExpertOptions = ExpertOptions()
    communication: CommOptions = CommOptions()
    mtp: MtpOptions | None = None
    sparse_attention: SparseAttention | None = None
    host: HostOptions = HostOptions()
    preset: str | None = None

    @property
    def devices(self) -> int:
        """Devices one instance occupies (what a pool bills per instance)."""
        return self.tp * self.dp * self.pp

    @property
    def micro_batches(self) -> int:
        """Pipeline micro-batches per iteration (default: one per stage)."""
        return self.pp_micro_batches or self.pp

    @property
    def tokens_per_step(self) -> float:
        return 1.0 if self.mtp is None else self.mtp.tokens_per_step

    @property
    def draft_tokens(self) -> int:
        return 0 if self.mtp is None else self.mtp.draft_tokens


def available_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_preset(name: str, where: str) -> dict:
    path = PRESET_DIR / f"{name}.yaml"
    if not path.is_file():
        raise InputError(where, "deployment.preset", f"unknown preset {name!r}",
                         f"use one of: {', '.join(available_presets())}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise InputError(str(path), "file", f"cannot parse ({type(err).__name__})", "fix the syntax") from None
    if not isinstance(data, dict) or "preset" in data:
        raise InputError(str(path), "file", "must be a mapping of deployment keys (presets do not nest)",
                         "see conf/deployment/deepseek_v3_decode.yaml")
    return data


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


class _Reader:
    """Typed access to one mapping of the deployment, reporting `where: deployment.<prefix><key>`."""

    def __init__(self, data: Any, where: str, prefix: str, valid: tuple[str, ...]) -> None:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            name = "deployment" + (f".{prefix.rstrip('.')}" if prefix else "")
            raise InputError(where, name, f"must be a mapping, got {data!r}", "give key: value pairs")
        unknown = sorted(set(map(str, data)) - set(valid))
        if unknown:
            raise InputError(where, f"deployment.{prefix}{unknown[0]}", "unknown key",
                             f"valid keys: {', '.join(valid)}")
        self.data, self.where, self.prefix = data, where, prefix

    def _fail(self, key: str, problem: str, fix: str):
        raise InputError(self.where, f"deployment.{self.prefix}{key}", problem, fix)

    def integer(self, key: str, default: int, lo: int = 1) -> int:
        v = self.opt_integer(key, default, lo)
        assert v is not None
        return v

    def opt_integer(self, key: str, default: int | None, lo: int = 1) -> int | None:
        v = self.data.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or float(v) != int(v) or int(v) < lo:
            self._fail(key, f"must be an integer >= {lo}, got {v!r}", f"give an integer >= {lo}")
        return int(v)

    def number(self, key: str, default: float, lo: float, hi: float = math.inf, hi_open: bool = False) -> float:
        v = self.opt_number(key, default, lo, hi, hi_open)
        assert v is not None
        return v

    def opt_number(self, key: str, default: float | None, lo: float, hi: float = math.inf,
                  hi_open: bool = False) -> float | None:
        v = self.data.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= v and (v < hi if hi_open else v <= hi)):
            self._fail(key, f"must be a number in [{lo}, {hi}{')' if hi_open else ']'}, got {v!r}", "fix the value")
        return float(v)

    def bool(self, key: str, default: bool) -> bool:
        v = self.data.get(key, default)
        if not isinstance(v, bool):
            self._fail(key, f"must be true or false, got {v!r}", "give true or false")
        return v

    def choice(self, key: str, default: str, choices) -> str:
        v = self.data.get(key, default)
        if v not in choices:
            self._fail(key, f"must be one of {', '.join(choices)}, got {v!r}", f"use one of: {', '.join(choices)}")
        return str(v)

    def floats(self, key: str, lo: float, hi: float) -> tuple[float, ...] | None:
        v = self.data.get(key)
        if v is None:
            return None
        if not isinstance(v, (list, tuple)) or not v or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and lo <= x <= hi for x in v):
            self._fail(key, f"must be a non-empty list of numbers in [{lo}, {hi}], got {v!r}", "fix the list")
        return tuple(float(x) for x in v)

    def sub(self, key: str, valid: tuple[str, ...]) -> _Reader | None:
        if key not in self.data or self.data[key] is None:
            return None
        return _Reader(self.data[key], self.where, f"{self.prefix}{key}.", valid)


def _fields(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def parse_deployment(raw: dict | None, *, tp: int, weights_dtype: str, where: str) -> Deployment:
    """The `Deployment` of a pool from its `deployment:` mapping (None: one replica on `tp` devices, every weight
    group in `weights_dtype` except the LM head in bf16, as before deployments existed)."""
    data = dict(raw or {})
    preset = data.pop("preset", None)
    if preset is not None:
        data = _merge(load_preset(str(preset), where), data)
    if "tp" in data:
        raise InputError(where, "deployment.tp", "tensor parallelism is the pool's own `tp:` field",
                         "move it to the pool (presets leave it out)")
    top = ("dp", "ep", "pp", "pp_micro_batches", "pp_bubble", "weights", "experts", "communication", "mtp",
           "sparse_attention", "host")
    r = _Reader(data, where, "", top)
    dtypes = tuple(DTYPES)
    w = r.sub("weights", WEIGHT_GROUPS)
    weights = {g: weights_dtype for g in WEIGHT_GROUPS} | {"lm_head": "bf16"}
    if w is not None:
        weights |= {g: w.choice(g, weights[g], dtypes) for g in WEIGHT_GROUPS}
    e = r.sub("experts", _fields(ExpertOptions)) or _Reader({}, where, "experts.", _fields(ExpertOptions))
    experts = ExpertOptions(
        redundant=e.integer("redundant", 0, lo=0), imbalance=e.opt_number("imbalance", None, 1.0),
        load_histogram=e.floats("load_histogram", 0.0, float("inf")), zipf_s=e.opt_number("zipf_s", None, 0.0),
        statistical_imbalance=e.bool("statistical_imbalance", True),
        cold_fraction=e.number("cold_fraction", 0.0, 0.0, 1.0, hi_open=True),
        cold_traffic_share=e.opt_number("cold_traffic_share", None, 0.0, 1.0))
    if experts.load_histogram is not None and not sum(experts.load_histogram) > 0:
        e._fail("load_histogram", "sums to 0", "give relative loads, at least one positive")
    c = r.sub("communication", _fields(CommOptions)) or _Reader({}, where, "communication.", _fields(CommOptions))
    comm = CommOptions(dispatch_dtype=c.choice("dispatch_dtype", "bf16", dtypes),
                       combine_dtype=c.choice("combine_dtype", "bf16", dtypes),
                       overlap=c.choice("overlap", "none", OVERLAPS), node_dedup=c.bool("node_dedup", False),
                       ep_kernel_prefill=c.choice("ep_kernel_prefill", "generic", EP_KERNELS),
                       ep_kernel_decode=c.choice("ep_kernel_decode", "generic", EP_KERNELS),
                       comm_sms=c.integer("comm_sms", 0, lo=0))
    mtp = None
    if (m := r.sub("mtp", _fields(MtpOptions))) is not None:
        n = m.integer("draft_tokens", 1)
        acc = m.floats("acceptance", 0.0, 1.0)
        if acc is None or len(acc) != n:
            m._fail("acceptance", f"needs {n} probabilities (one per draft token), got {acc!r}",
                    "e.g. acceptance: [0.85] for one draft (DeepSeek-V3 report: 85-90%)")
        assert acc is not None
        mtp = MtpOptions(n, acc)
    sparse = None
    if (s := r.sub("sparse_attention", _fields(SparseAttention))) is not None:
        sparse = SparseAttention(top_k_tokens=s.integer("top_k_tokens", 2048), indexer_heads=s.integer("indexer_heads", 64),
                                 indexer_head_dim=s.integer("indexer_head_dim", 128),
                                 indexer_dtype=s.choice("indexer_dtype", "fp8_block", dtypes))
    h = r.sub("host", _fields(HostOptions)) or _Reader({}, where, "host.", _fields(HostOptions))
    host = HostOptions(cuda_graphs=h.bool("cuda_graphs", True),
                       cuda_graph_max_tokens=h.integer("cuda_graph_max_tokens", 512),
                       step_overhead_s=h.opt_number("step_overhead_s", None, 0.0),
                       kernel_launch_host_s=h.opt_number("kernel_launch_host_s", None, 0.0))
    return Deployment(tp=int(tp), dp=r.integer("dp", 1), ep=r.integer("ep", 1), pp=r.integer("pp", 1),
                      pp_micro_batches=r.opt_integer("pp_micro_batches", None), pp_bubble=r.bool("pp_bubble", False),
                      weights=weights, experts=experts, communication=comm,
                      mtp=mtp, sparse_attention=sparse, host=host, preset=None if preset is None else str(preset))
