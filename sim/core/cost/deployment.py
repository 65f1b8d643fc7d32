"""A pool's deployment: how one instance spreads the model over devices, and the serving options it runs with.

Read from the pool's free-form `deployment:` mapping. `preset: <name>` starts from `conf/deployment/<name>.yaml`;
keys given inline override the preset's (nested mappings key by key). Tensor parallelism stays the pool's own
`tp:` field. Every key, its unit and its default are documented in docs/cost-model.md ("Deployments"); an unknown
key or a bad value is an `InputError` naming the pool, the key and the fix, read through the same
`scenarios/config_reader.py` `ConfigReader` as the traffic configs (one message form). Parsed once at load
(sim/resolve.py). Model-dependent checks (experts divisible over EP ranks, ...) happen in `sim.core.cost.layout`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from calibrate.ops import DTYPES
from inferplan.errors import InputError
from inferplan.specs import CONF_DIR
from scenarios.config_reader import ConfigReader

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


def _section(r: ConfigReader, key: str) -> ConfigReader:
    """The reader of a nested section (an empty one when absent: every key then takes its default)."""
    sub = r.nested(key, None)
    return sub if sub is not None else ConfigReader({}, file=r.file, where=r.path(key))


def _numbers(r: ConfigReader, key: str, minimum: float, maximum: float | None = None) -> tuple[float, ...] | None:
    if not r.has(key):
        return None
    return tuple(r.number_list(key, minimum=minimum, maximum=maximum))


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
    r = ConfigReader(data, file=where, where="deployment")
    dp, ep, pp = r.integer("dp", 1, minimum=1), r.integer("ep", 1, minimum=1), r.integer("pp", 1, minimum=1)
    pp_micro_batches, pp_bubble = r.optional_integer("pp_micro_batches", minimum=1), r.boolean("pp_bubble", False)
    dtypes = tuple(DTYPES)
    weights = {g: weights_dtype for g in WEIGHT_GROUPS} | {"lm_head": "bf16"}
    w = _section(r, "weights")
    weights |= {g: w.string(g, weights[g], choices=dtypes) for g in WEIGHT_GROUPS}
    e = _section(r, "experts")
    experts = ExpertOptions(
        redundant=e.integer("redundant", 0, minimum=0), imbalance=e.optional_number("imbalance", minimum=1.0),
        load_histogram=_numbers(e, "load_histogram", 0.0), zipf_s=e.optional_number("zipf_s", minimum=0.0),
        statistical_imbalance=e.boolean("statistical_imbalance", True),
        cold_fraction=e.number("cold_fraction", 0.0, minimum=0.0, below=1.0),
        cold_traffic_share=e.optional_number("cold_traffic_share", minimum=0.0, maximum=1.0))
    if experts.load_histogram is not None and not sum(experts.load_histogram) > 0:
        raise e.error("load_histogram", "sums to 0", "give relative loads, at least one positive")
    c = _section(r, "communication")
    comm = CommOptions(dispatch_dtype=c.string("dispatch_dtype", "bf16", choices=dtypes),
                       combine_dtype=c.string("combine_dtype", "bf16", choices=dtypes),
                       overlap=c.string("overlap", "none", choices=OVERLAPS), node_dedup=c.boolean("node_dedup", False),
                       ep_kernel_prefill=c.string("ep_kernel_prefill", "generic", choices=EP_KERNELS),
                       ep_kernel_decode=c.string("ep_kernel_decode", "generic", choices=EP_KERNELS),
                       comm_sms=c.integer("comm_sms", 0, minimum=0))
    mtp = None
    if (m := r.nested("mtp", None)) is not None:
        n = m.integer("draft_tokens", 1, minimum=1)
        acc = _numbers(m, "acceptance", 0.0, 1.0)
        if acc is None or len(acc) != n:
            raise m.error("acceptance", f"needs {n} probabilities (one per draft token), got {acc!r}",
                          "e.g. acceptance: [0.85] for one draft (DeepSeek-V3 report: 85-90%)")
        m.finish()
        mtp = MtpOptions(n, acc)
    sparse = None
    if (sa := r.nested("sparse_attention", None)) is not None:
        sparse = SparseAttention(top_k_tokens=sa.integer("top_k_tokens", 2048, minimum=1),
                                 indexer_heads=sa.integer("indexer_heads", 64, minimum=1),
                                 indexer_head_dim=sa.integer("indexer_head_dim", 128, minimum=1),
                                 indexer_dtype=sa.string("indexer_dtype", "fp8_block", choices=dtypes))
        sa.finish()
    h = _section(r, "host")
    host = HostOptions(cuda_graphs=h.boolean("cuda_graphs", True),
                       cuda_graph_max_tokens=h.integer("cuda_graph_max_tokens", 512, minimum=1),
                       step_overhead_s=h.optional_number("step_overhead_s", minimum=0.0),
                       kernel_launch_host_s=h.optional_number("kernel_launch_host_s", minimum=0.0))
    for section in (w, e, c, h):
        section.finish()
    dep = Deployment(tp=int(tp), dp=dp, ep=ep, pp=pp, pp_micro_batches=pp_micro_batches, pp_bubble=pp_bubble,
                     weights=weights, experts=experts, communication=comm,
                     mtp=mtp, sparse_attention=sparse, host=host, preset=None if preset is None else str(preset))
    r.finish()
    return dep
