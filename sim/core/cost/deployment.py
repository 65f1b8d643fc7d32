"""A pool's deployment parsed into its record (`inferplan/config/deployment.py` `Deployment`).

Read from the pool's free-form `deployment:` mapping. `preset: <name>` starts from `conf/deployment/<name>.yaml`;
keys given inline override the preset's (nested mappings key by key). Tensor parallelism stays the pool's own
`tp:` field. Every key, its unit and its default are documented in docs/cost-model.md ("Deployments"); an unknown
key or a bad value is an `InputError` naming the pool, the key and the fix, read through the same
`scenarios/config_reader.py` `ConfigReader` as the traffic configs (one message form). Parsed once at load
(sim/resolve.py). Model-dependent checks (experts divisible over EP ranks, ...) happen in `sim.core.cost.layout`.
"""
from __future__ import annotations

from calibrate.ops import DTYPES
from inferplan.config.deployment import (EP_KERNELS, OVERLAPS, WEIGHT_GROUPS, CommOptions, Deployment,
                                         ExpertOptions, HostOptions, MtpOptions, SparseAttention)
from inferplan.config.yaml_files import read_yaml
from inferplan.errors import InputError
from inferplan.specs import CONF_DIR
from scenarios.config_reader import ConfigReader

PRESET_DIR = CONF_DIR / "deployment"


def available_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_preset(name: str, where: str) -> dict:
    path = PRESET_DIR / f"{name}.yaml"
    if not path.is_file():
        raise InputError(where, "deployment.preset", f"unknown preset {name!r}",
                         f"use one of: {', '.join(available_presets())}")
    data = read_yaml(path) or {}
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
